"""Offline recomputation of sensor_alerts, hashtag_counts (its repartition and its
counts) and vehicle_speed (pure, from the agents' specifications, not Eddy's
operators).

Inputs are per input partition in offset order, as read back from Kafka.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MIN_MS = -(2**63)

# -- sensor_alerts ---------------------------------------------------------------------

FREEZING_F = 32.0
CLEAN_AFTER_MS = 3_600_000

Reading = tuple[str, int, float]  # sensor, timestamp_ms, temperature
# (sensor, timestamp_ms, temperature, kind): what the alert is about.
AlertId = tuple[str, int, float, str]


@dataclass
class AlertsExpected:
    """Freezing and threshold alerts (``rising`` depends on processing time: not here)."""

    want: Counter[AlertId] = field(default_factory=Counter)
    values: dict[AlertId, dict[str, Any]] = field(default_factory=dict)


def final_thresholds(updates: Iterable[tuple[str, float]]) -> dict[str, float]:
    """The broadcast state after every update in order: 0.0 removes a threshold."""
    active: dict[str, float] = {}
    for sensor, threshold in updates:
        if threshold != 0.0:
            active[sensor] = threshold
        else:
            active.pop(sensor, None)
    return active


def expected_alerts(
    by_partition: Mapping[int, Iterable[Reading]],
    thresholds: Mapping[str, float],
    bound_ms: int,
) -> AlertsExpected:
    """Per reading, in partition order: ``freezing`` below 32 F; ``threshold`` when
    the change since the sensor's previous reading exceeds its threshold. A sensor
    silent for an hour of event time forgets its previous reading."""
    out = AlertsExpected()
    for readings in by_partition.values():
        last: dict[str, tuple[float, int]] = {}  # sensor -> (temperature, forget at)
        watermark_ms = MIN_MS
        for sensor, ts, temp in readings:
            previous = last.get(sensor)
            if previous is not None and previous[1] <= watermark_ms:
                previous = None  # its cleanup timer fired before this reading
            last[sensor] = (temp, ts + CLEAN_AFTER_MS)
            if temp < FREEZING_F:
                freezing = {"sensor_id": sensor, "kind": "freezing"}
                freezing["message"] = f"Freezing Alarm for {sensor}"
                _add(out, (sensor, ts, temp, "freezing"), freezing, ts, temp)
            threshold = thresholds.get(sensor)
            if threshold is not None and previous is not None:
                diff = abs(temp - previous[0])
                if diff > threshold:
                    message = f"Temperature of sensor '{sensor}' changed by {diff:.2f} F"
                    change = {"sensor_id": sensor, "kind": "threshold", "message": message}
                    at = (sensor, ts, temp, "threshold")
                    _add(out, at, change, ts, temp, diff=diff, threshold=threshold)
            watermark_ms = max(watermark_ms, ts - bound_ms - 1)
    return out


def _add(
    out: AlertsExpected, at: AlertId, alert: dict[str, Any], ts: int, temp: float, **extra: Any
) -> None:
    out.want[at] += 1
    out.values[at] = {**alert, **extra, "timestamp_ms": ts, "temperature": temp}


# -- hashtag_counts: tweets -> mentions by hashtag -> counts ------------------------------

HASHTAG_WINDOW_MS = 60_000

Tweet = tuple[str, str, int]  # tweet_id, text, timestamp_ms


def tags_of(text: str) -> list[str]:
    """Words starting with ``#``, lower-cased, each once, in order (the harness's
    tweets separate words with spaces and tags are letters, digits and ``_``)."""
    return list(dict.fromkeys(w[1:].lower() for w in text.split() if w.startswith("#") and w[1:]))


@dataclass
class HashtagsExpected:
    mentions: dict[tuple[str, str], int] = field(default_factory=dict)  # (tweet, tag) -> ts
    counts: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    # Tweets that came later than the bound behind their partition: whether the
    # counting stage drops them depends on timing. The harness sends none.
    ambiguous: list[str] = field(default_factory=list)


def expected_hashtags(
    by_partition: Mapping[int, Iterable[Tweet]], *, partitions: int, bound_ms: int
) -> HashtagsExpected:
    """Mentions on the repartition topic, then 1 min counts and running totals.

    The counting stage's clock is the minimum over the upstream (tweet) partitions
    of their watermarks, with no idle timeout: a tweet on time in its own partition
    is on time downstream too, and a window closes once every tweet partition's
    watermark passed its end (nothing closes while a partition has no tweet).
    """
    out = HashtagsExpected()
    windows: Counter[tuple[str, int]] = Counter()
    final: list[int] = []
    for tweets in by_partition.values():
        max_ts: int | None = None
        for tweet_id, text, ts in tweets:
            start = ts - ts % HASHTAG_WINDOW_MS
            if max_ts is not None and start + HASHTAG_WINDOW_MS - 1 <= max_ts - bound_ms - 1:
                out.ambiguous.append(tweet_id)
            for tag in tags_of(text):
                out.mentions[(tweet_id, tag)] = ts
                windows[(tag, start)] += 1
            max_ts = ts if max_ts is None else max(max_ts, ts)
        if max_ts is not None:
            final.append(max_ts - bound_ms - 1)
    if len(final) < partitions:
        return out
    watermark_ms = min(final)
    totals: dict[str, int] = defaultdict(int)
    for (tag, start), count in sorted(windows.items(), key=lambda item: item[0][1]):
        if start + HASHTAG_WINDOW_MS - 1 <= watermark_ms:
            totals[tag] += count
            out.counts[(tag, start)] = {
                "hashtag": tag,
                "window_start_ms": start,
                "window_end_ms": start + HASHTAG_WINDOW_MS,
                "count": count,
                "total": totals[tag],
                "timing": "first",
            }
    return out


# -- vehicle_speed ---------------------------------------------------------------------

OBD_DELAY_MS = 30_000
APP_DELAY_MS = 180_000
ROLLING = 100

Speed = tuple[str, int, float]  # vehicle, timestamp_ms, speed_kmh


@dataclass
class VehiclesExpected:
    checks: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    ambiguous: list[Speed] = field(default_factory=list)  # possibly late: none sent


def _own_watermark_pass(
    speeds: Iterable[Speed], delay_ms: int, ambiguous: list[Speed]
) -> tuple[dict[tuple[str, int], list[float]], int]:
    """Speeds per (vehicle, second), and the input's final watermark. A record is
    surely on time when its second is after its own input's watermark (the clock,
    the minimum of both inputs, is never ahead of it); others are ambiguous."""
    seconds: dict[tuple[str, int], list[float]] = defaultdict(list)
    max_ts: int | None = None
    for vehicle, ts, kmh in speeds:
        second = ts - ts % 1_000
        if max_ts is not None and second + 999 <= max_ts - delay_ms - 1:
            ambiguous.append((vehicle, ts, kmh))
        seconds[(vehicle, second)].append(kmh)
        max_ts = ts if max_ts is None else max(max_ts, ts)
    return seconds, MIN_MS if max_ts is None else max_ts - delay_ms - 1


def expected_checks(
    obd: Mapping[int, Iterable[Speed]],
    app: Mapping[int, Iterable[Speed]],
    tolerance_kmh: float,
) -> VehiclesExpected:
    """vehicle_speed: each second of a vehicle with both an OBD and an app speed,
    closed once both inputs of its partition passed it; each side averaged; the
    vehicle's rolling agreement over its last 100 checks, seconds in order."""
    out = VehiclesExpected()
    closed: dict[tuple[str, int], tuple[list[float], list[float]]] = {}
    for p in sorted(set(obd) | set(app)):
        obd_seconds, obd_wm = _own_watermark_pass(obd.get(p, ()), OBD_DELAY_MS, out.ambiguous)
        app_seconds, app_wm = _own_watermark_pass(app.get(p, ()), APP_DELAY_MS, out.ambiguous)
        clock = min(obd_wm, app_wm)
        for at, obd_kmh in obd_seconds.items():
            if at in app_seconds and at[1] + 999 <= clock:
                closed[at] = (obd_kmh, app_seconds[at])
    history: dict[str, list[bool]] = defaultdict(list)
    for (vehicle, second), (obd_kmh, app_kmh) in sorted(closed.items()):
        obd_avg, app_avg = sum(obd_kmh) / len(obd_kmh), sum(app_kmh) / len(app_kmh)
        diff = round(app_avg - obd_avg, 3)
        agrees = abs(diff) <= tolerance_kmh
        recent = history[vehicle]
        recent.append(agrees)
        del recent[:-ROLLING]
        # What vehicle-speed-checks carries: the joined value only (the window is
        # its second, ``second_ms``; REST adds the window's bounds and timing).
        out.checks[(vehicle, second)] = {
            "vehicle_id": vehicle,
            "second_ms": second,
            "obd_speed_kmh": round(obd_avg, 3),
            "app_speed_kmh": round(app_avg, 3),
            "diff_kmh": diff,
            "within_tolerance": agrees,
            "rolling_agreement": round(sum(recent) / len(recent), 4),
        }
    return out
