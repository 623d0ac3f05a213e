"""The reference app's topics: their values, keys and event time."""

from __future__ import annotations

from agents.records import GameEvent, SensorReading, ThresholdUpdate, Tweet, VehicleSpeed
from service import Topic

READINGS = Topic("sensor-readings", SensorReading, key="sensor_id", timestamp="timestamp_ms")
THRESHOLDS = Topic("sensor-thresholds", ThresholdUpdate, key="sensor_id", partitions=1)
AVERAGES = Topic("sensor-averages")
LATE_READINGS = Topic("late-readings", SensorReading, key="sensor_id")
MINMAX = Topic("sensor-minmax")
COUNTS = Topic("sensor-counts")
COUNTS_LATE = Topic("sensor-counts-late", SensorReading, key="sensor_id")
ALERTS = Topic("sensor-alerts")
ROOMS = Topic("sensor-rooms")
OBD_SPEED = Topic("vehicle-obd-speed", VehicleSpeed, key="vehicle_id", timestamp="timestamp_ms")
APP_SPEED = Topic("vehicle-app-speed", VehicleSpeed, key="vehicle_id", timestamp="timestamp_ms")
SPEED_CHECKS = Topic("vehicle-speed-checks")
TWEETS = Topic("tweets", Tweet, key="user", timestamp="timestamp_ms")
HASHTAG_COUNTS = Topic("hashtag-counts")
GAME_EVENTS = Topic("game-events", GameEvent, key="team", timestamp="ts")
POWERUPS = Topic("team-powerups")
