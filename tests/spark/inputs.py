"""The fixed input of the Spark tests, and what it means, computed here in plain
Python (not by Eddy's core) to compare the jobs' outputs with."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

BASE = 1_699_999_200_000  # on the hour
HOUR_MS = 3_600_000
SENSORS = ["s1", "s2", "s3", "s4"]
READING_EVERY_MS = 6_000
READINGS_FOR_MS = 2 * HOUR_MS + 20 * 60_000
VEHICLES = ["v1", "v2", "v3"]
CHECK_SECONDS = 240
TAGS = ["kafka", "spark", "flink", "eddy", "rust"]
TWEET_EVERY_MS = 20_000
TWEETS_FOR_MS = 3 * HOUR_MS
FAR_MS = 5 * HOUR_MS  # closing records: every earlier window fires


def temperature(sensor: int, t: int) -> float:
    value = 40.0 + ((t // READING_EVERY_MS) * (sensor + 3)) % 17 + sensor * 0.25
    return 20.0 + sensor if (t // READING_EVERY_MS) % (9 + sensor) == 0 else value


def readings(changed: bool = False) -> list[dict[str, Any]]:
    rows = []
    span = READINGS_FOR_MS + (30_000 if changed else 0)
    for t in range(0, span, READING_EVERY_MS):
        for n, sensor in enumerate(SENSORS):
            rows.append(
                {"sensor_id": sensor, "timestamp_ms": BASE + t, "temperature": temperature(n, t)}
            )
    return rows


def speed(vehicle: int, second: int) -> tuple[float, float]:
    obd = 50.0 + (second * (vehicle + 1)) % 40
    off = ((second * 7 + vehicle * 3) % 13) - 6.0 + vehicle * 1.5
    return obd, obd + off


def tweets() -> list[dict[str, Any]]:
    rows = []
    for n, t in enumerate(range(0, TWEETS_FOR_MS, TWEET_EVERY_MS)):
        hour = t // HOUR_MS
        # Each hour favours a different tag, so the top and the growth move.
        tags = [TAGS[(hour + k) % len(TAGS)] for k in range(1 + n % 3)]
        if n % 4 == 0:
            tags.append(TAGS[hour % len(TAGS)])
        text = "news " + " ".join(f"#{tag}" for tag in tags)
        rows.append(
            {"tweet_id": f"t{n}", "user": f"u{n % 7}", "text": text, "timestamp_ms": BASE + t}
        )
    return rows


def closing_ms(changed: bool = False) -> int:
    """A reading this far in closes every window of the readings before it, and is
    too early for sensor_alerts' 1 h clean-up timers."""
    return READINGS_FOR_MS + (30_000 if changed else 0) + 10_000


def lines(changed: bool = False) -> list[dict[str, Any]]:
    # Tweets first, each followed by a processing-time tick: hashtag_counts' re-keying
    # stage sends its watermark downstream on ticks. No tick comes after the readings,
    # so sensor_alerts' "rising" timers (1 s of processing time) never fire.
    out: list[dict[str, Any]] = []
    far_tweet = {"tweet_id": "far", "user": "u0", "text": "bye", "timestamp_ms": BASE + FAR_MS}
    for n, tweet in enumerate([*tweets(), far_tweet]):
        out.append({"topic": "tweets", "record": tweet})
        out.append({"processing_time": (n + 1) * 100})
    out += [{"processing_time": 100_000 + n * 1_000} for n in range(3)]  # the far watermark
    out.append({"topic": "sensor-thresholds", "record": {"sensor_id": "s2", "threshold": 6.0}})
    out += [{"topic": "sensor-readings", "record": r} for r in readings(changed)]
    for n, sensor in enumerate(SENSORS):
        far = {
            "sensor_id": sensor,
            "timestamp_ms": BASE + closing_ms(changed),
            "temperature": 50.0 + n,
        }
        out.append({"topic": "sensor-readings", "record": far})
    for second in range(CHECK_SECONDS):
        for v, vehicle in enumerate(VEHICLES):
            obd, app = speed(v, second)
            ts = BASE + second * 1_000 + 100
            obd_record = {"vehicle_id": vehicle, "timestamp_ms": ts, "speed_kmh": obd}
            app_record = {"vehicle_id": vehicle, "timestamp_ms": ts + 1, "speed_kmh": app}
            # The device repeats itself three times a second.
            out += [{"topic": "vehicle-obd-speed", "record": obd_record}] * 3
            out.append({"topic": "vehicle-app-speed", "record": app_record})
    for vehicle in VEHICLES:
        for topic in ("vehicle-obd-speed", "vehicle-app-speed"):
            far = {"vehicle_id": vehicle, "timestamp_ms": BASE + FAR_MS, "speed_kmh": 1.0}
            out.append({"topic": topic, "record": far})
    return out


# -- expected values, computed independently --------------------------------------


def window_averages() -> dict[tuple[str, int], float]:
    """(sensor, window start) -> average of its 5 s window."""
    temps: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in readings():
        temps[(r["sensor_id"], r["timestamp_ms"] // 5_000 * 5_000)].append(r["temperature"])
    return {k: sum(v) / len(v) for k, v in temps.items()}


def alerts() -> dict[str, list[str]]:
    """Each sensor's alert kinds, oldest first, all of them (state keeps the last 20)."""
    kinds: dict[str, list[str]] = defaultdict(list)
    previous: dict[str, float] = {}
    rows = readings() + [
        {"sensor_id": s, "timestamp_ms": BASE + closing_ms(), "temperature": 50.0 + n}
        for n, s in enumerate(SENSORS)
    ]
    for r in rows:
        sensor, temp = r["sensor_id"], r["temperature"]
        if temp < 32.0:
            kinds[sensor].append("freezing")
        if sensor == "s2" and sensor in previous and round(abs(temp - previous[sensor]), 6) > 6.0:
            kinds[sensor].append("threshold")
        previous[sensor] = temp
    return kinds


def speed_diffs() -> dict[str, list[tuple[int, float]]]:
    """vehicle -> [(second_ms, app - obd)]."""
    diffs: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for second in range(CHECK_SECONDS):
        for v, vehicle in enumerate(VEHICLES):
            obd, app = speed(v, second)
            diffs[vehicle].append((BASE + second * 1_000, round(app - obd, 3)))
    return diffs


def hourly_mentions() -> dict[tuple[str, int], int]:
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for t in tweets():
        tags = dict.fromkeys(w[1:].lower() for w in t["text"].split() if w.startswith("#"))
        for tag in tags:
            counts[(tag, t["timestamp_ms"] // HOUR_MS * HOUR_MS)] += 1
    return counts
