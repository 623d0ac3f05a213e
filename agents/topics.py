"""The reference app's topics: their values, keys and event time."""

from __future__ import annotations

from eddy import Avro, Topic
from eddy.examples.records import GameEvent, SensorReading, ThresholdUpdate, Tweet, VehicleSpeed
from eddy.examples.settings import SensorSettings

READINGS = Topic("sensor-readings", SensorReading, key="sensor_id", timestamp="timestamp_ms")
# The same readings as Avro (EDDY_READINGS_FORMAT=avro): what a team's producers
# that use a schema registry write. The agents read either as a SensorReading.
SENSOR_READING_AVRO = {
    "type": "record",
    "name": "SensorReading",
    "namespace": "eddy.sensors",
    "fields": [
        {"name": "sensor_id", "type": "string"},
        {"name": "timestamp_ms", "type": "long"},
        {"name": "temperature", "type": "double"},
    ],
}
READINGS_AVRO = Topic(
    "sensor-readings",
    SensorReading,
    key="sensor_id",
    timestamp="timestamp_ms",
    serde=Avro(SENSOR_READING_AVRO),
)
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


def readings(settings: SensorSettings) -> Topic[SensorReading]:
    """The readings topic in the format ``EDDY_READINGS_FORMAT`` names."""
    return READINGS_AVRO if settings.readings_format == "avro" else READINGS
