"""The reference agents on the real broker: a fixed input, the read_committed
output compared with a result computed independently here (not by Eddy's core)."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from eddy import examples
from eddy.settings import Settings
from eddy.topics import TopicSpec, ensure_topics
from eddy.worker import Worker
from tests.support.kafka import produce, read_all, readings_topic, unique_settings

pytestmark = pytest.mark.integration

TOLERANCE_KMH = 5.0  # vehicle_speed's default (EDDY_SPEED_TOLERANCE_KMH)
# An hour ago, on the hour (outputs carry event time as their Kafka timestamp).
BASE = (time.time_ns() // 3_600_000_000_000 - 1) * 3_600_000


def json_records(key_field: str, rows: list[dict[str, Any]]) -> list[tuple[bytes, bytes]]:
    return [(str(r[key_field]).encode(), orjson.dumps(r)) for r in rows]


async def outputs(settings: Settings, topic: str, at_least: int) -> list[dict[str, Any]]:
    records = await read_all(settings, settings.topic(topic), min_records=at_least)
    return [orjson.loads(r.value) for r in records]


@pytest.fixture
async def started(tmp_path: Path) -> AsyncIterator[Any]:
    workers: list[Worker] = []

    async def start(*names: str) -> tuple[Settings, Worker]:
        settings = unique_settings(tmp_path / names[0], agents=names)
        await ensure_topics(settings, [TopicSpec(readings_topic(settings), 6)])
        worker = Worker(settings, examples.app.build(settings))
        await worker.start()
        workers.append(worker)
        return settings, worker

    yield start
    for worker in workers:
        await worker.stop()


def reading(sensor: str, offset_ms: int, temp: float) -> dict[str, Any]:
    return {"sensor_id": sensor, "timestamp_ms": BASE + offset_ms, "temperature": temp}


async def test_sensor_minmax_emits_min_max_and_window_end(started: Any) -> None:
    settings, _ = await started("sensor_minmax")
    rows = [
        reading(s, t, float((t // 700 + i * 3) % 50))
        for t in range(0, 20_000, 350)  # in time order: nothing is late
        for i, s in enumerate("abc")
    ]
    closing = [reading(s, 60_000, 0.0) for s in "abc"]
    await produce(settings, readings_topic(settings), json_records("sensor_id", rows + closing))
    expected: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in rows:
        start = (r["timestamp_ms"] - BASE) // 5_000 * 5_000 + BASE
        expected[(r["sensor_id"], start)].append(r["temperature"])
    got = await outputs(settings, "sensor-minmax", len(expected))
    assert {
        (o["sensor_id"], o["window_start_ms"]): (o["min"], o["max"], o["end_ts"]) for o in got
    } == {k: (min(v), max(v), k[1] + 5_000) for k, v in expected.items()}


async def test_sensor_counts_fire_first_then_update_within_five_seconds(started: Any) -> None:
    settings, _ = await started("sensor_counts")
    # Offsets of one sensor's readings, in arrival order. [0, 10 s) fires when the
    # watermark reaches 9_999 (a reading at >= 11_000); its state stays until the
    # watermark reaches 14_999 (a reading at >= 16_000).
    arrivals = [1_000, 5_000, 9_000, 11_000, 2_000, 12_000, 3_000, 16_500, 4_000, 30_000]
    rows = [reading("s1", t, 1.0) for t in arrivals]
    await produce(settings, readings_topic(settings), json_records("sensor_id", rows))

    # Independent expectation: walk the arrivals with the rule written out.
    emitted, late, watermark, state = [], [], -(2**63), {}
    for t in arrivals:
        start = t // 10_000 * 10_000
        end = start + 10_000
        if end - 1 + 5_000 <= watermark:
            late.append(t)
        else:
            count, fired = state.get(start, (0, False))
            state[start] = (count + 1, fired)
            if fired:
                emitted.append((end, count + 1, "update"))
        watermark = max(watermark, t - 1_000 - 1)
        for s, (count, fired) in sorted(state.items()):
            if not fired and s + 10_000 - 1 <= watermark:
                emitted.append((s + 10_000, count, "first"))
                state[s] = (count, True)
    got = await outputs(settings, "sensor-counts", len(emitted))
    assert [(o["window_end_ms"] - BASE, o["count"], o["timing"]) for o in got] == emitted
    assert emitted[:2] == [(10_000, 3, "first"), (10_000, 4, "update")]
    late_got = await outputs(settings, "sensor-counts-late", len(late))
    assert [o["timestamp_ms"] - BASE for o in late_got] == late == [4_000]


async def test_sensor_alerts_freezing_threshold_and_rising(started: Any) -> None:
    settings, worker = await started("sensor_alerts")
    thresholds = [
        {"sensor_id": "s1", "threshold": 2.0},
        {"sensor_id": "s2", "threshold": 2.0},
        {"sensor_id": "s2", "threshold": 0.0},
    ]
    await produce(
        settings, settings.topic("sensor-thresholds"), json_records("sensor_id", thresholds)
    )
    await asyncio.sleep(2)
    rows = [
        reading("s1", 0, 50.0),
        reading("s1", 100, 55.0),  # +5 > 2: threshold alert
        reading("s2", 0, 50.0),
        reading("s2", 100, 55.0),  # threshold removed: none
        reading("s3", 0, 31.0),  # freezing
        reading("s4", 0, 40.0),
        reading("s4", 100, 41.0),
        reading("s4", 200, 42.0),  # rising
    ]
    await produce(settings, readings_topic(settings), json_records("sensor_id", rows))
    # Every sensor whose last two readings rose alerts once its timer (1 s of
    # processing time) fires; s2 had its threshold removed (0.0) before its jump.
    got = await outputs(settings, "sensor-alerts", 5)
    assert sorted((a["sensor_id"], a["kind"]) for a in got) == [
        ("s1", "rising"),
        ("s1", "threshold"),
        ("s2", "rising"),
        ("s3", "freezing"),
        ("s4", "rising"),
    ]
    url = f"http://127.0.0.1:{worker.api_port}/sensors/s3/alerts"
    for _ in range(50):
        async with httpx.AsyncClient() as client:
            response = await client.get(url)
        if response.status_code == 200:
            break
        await asyncio.sleep(0.2)
    assert [a["kind"] for a in response.json()["value"]] == ["freezing"]


async def test_vehicle_speed_checks_join_each_second_of_both_streams(started: Any) -> None:
    settings, worker = await started("vehicle_speed")
    obd, app = [], []
    for vehicle, offset in (("v1", 0.0), ("v2", 12.0)):
        for second in range(10):
            speed = 50.0 + second
            if second != 4:  # v's device drops out for one second
                obd += [
                    {
                        "vehicle_id": vehicle,
                        "timestamp_ms": BASE + second * 1_000,
                        "speed_kmh": speed,
                    }
                ] * 3
            if second % 3:  # the app skips some seconds
                app.append(
                    {
                        "vehicle_id": vehicle,
                        "timestamp_ms": BASE + second * 1_000 + 7,
                        "speed_kmh": speed + offset,
                    }
                )
    # Far ahead on both streams: past the app's 3 min delay, so every second closes.
    closing = [
        {"vehicle_id": v, "timestamp_ms": BASE + 400_000, "speed_kmh": 0.0} for v in ("v1", "v2")
    ]
    await produce(
        settings, settings.topic("vehicle-obd-speed"), json_records("vehicle_id", obd + closing)
    )
    await produce(
        settings, settings.topic("vehicle-app-speed"), json_records("vehicle_id", app + closing)
    )
    expected = {}
    obd_seconds = {(r["vehicle_id"], r["timestamp_ms"]) for r in obd}
    for r in app:
        second = r["timestamp_ms"] // 1_000 * 1_000
        if (r["vehicle_id"], second) in obd_seconds:
            diff = 12.0 if r["vehicle_id"] == "v2" else 0.0  # the app's offset
            expected[(r["vehicle_id"], second)] = (diff, abs(diff) <= TOLERANCE_KMH)
    got = await outputs(settings, "vehicle-speed-checks", len(expected))
    assert {
        (o["vehicle_id"], o["second_ms"]): (o["diff_kmh"], o["within_tolerance"]) for o in got
    } == expected
    url = f"http://127.0.0.1:{worker.api_port}/vehicles/v1/agreement"
    for _ in range(50):
        async with httpx.AsyncClient() as client:
            body = (await client.get(url)).json()
        if body.get("checks") == sum(1 for v, _ in expected if v == "v1"):
            break
        await asyncio.sleep(0.2)
    assert body["agreement_rate"] == 1.0


async def test_hashtags_are_repartitioned_and_counted_per_minute(started: Any) -> None:
    settings, worker = await started("hashtag_counts")
    texts = ["#Kafka and #flink", "#kafka #kafka again", "just words", "#Python #kafka", "#flink"]
    tweets = [
        {
            "tweet_id": f"t{i}",
            "user": f"u{i % 7}",
            "text": texts[i % len(texts)],
            "timestamp_ms": BASE + i * 1_500,
        }
        for i in range(100)  # 150 s of tweets: minutes 0, 1, 2
    ]
    closing = [
        {"tweet_id": f"c{u}", "user": f"u{u}", "text": "#end", "timestamp_ms": BASE + 600_000}
        for u in range(7)
    ]
    await ensure_topics(settings, [TopicSpec(settings.topic("tweets"), 6)])
    await produce(settings, settings.topic("tweets"), json_records("user", tweets + closing))
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for t in tweets:
        for tag in dict.fromkeys(w.lower() for w in t["text"].split() if w.startswith("#")):
            counts[(tag[1:], (t["timestamp_ms"] - BASE) // 60_000 * 60_000 + BASE)] += 1
    got = await outputs(settings, "hashtag-counts", len(counts))
    assert {(o["hashtag"], o["window_start_ms"]): o["count"] for o in got} == dict(counts)
    kafka_totals = [
        o["total"]
        for o in sorted(got, key=lambda o: o["window_start_ms"])
        if o["hashtag"] == "kafka"
    ]
    assert kafka_totals[-1] == sum(c for (tag, _), c in counts.items() if tag == "kafka")
    url = f"http://127.0.0.1:{worker.api_port}/hashtags/top"
    async with httpx.AsyncClient() as client:
        params = {"window_start_ms": BASE, "order_by": "count", "limit": 2}
        top = (await client.get(url, params=params)).json()
    minute0 = sorted(((c, tag) for (tag, w), c in counts.items() if w == BASE), reverse=True)
    assert [r["hashtag"] for r in top["results"]] == [tag for _, tag in minute0[:2]]


async def test_team_powerups_count_late_bursts_within_the_lateness(started: Any) -> None:
    settings, _ = await started("team_powerups")
    events = []
    for i in range(60):  # minute 0
        events.append({"player": "a1", "team": "red", "ts": BASE + i * 1_000, "bubbles": 10})
        events.append({"player": "b1", "team": "blue", "ts": BASE + i * 1_000, "bubbles": 5})
        events.append({"player": "c1", "team": "green", "ts": BASE + i * 1_000, "bubbles": 7})
    for i in range(60, 170):  # time moves on (to ~2.8 min), then a phone leaves a tunnel
        events.append({"player": "a1", "team": "red", "ts": BASE + i * 1_000, "bubbles": 1})
        events.append({"player": "c1", "team": "green", "ts": BASE + i * 1_000, "bubbles": 1})
    events += [
        {"player": "c2", "team": "green", "ts": BASE + 30_000, "bubbles": 20}
    ] * 6  # late burst
    events.append({"player": "c2", "team": "green", "ts": BASE + 600_000, "bubbles": 0})
    events.append({"player": "a1", "team": "red", "ts": BASE + 600_000, "bubbles": 0})
    events.append({"player": "b1", "team": "blue", "ts": BASE + 600_000, "bubbles": 0})
    await ensure_topics(settings, [TopicSpec(settings.topic("game-events"), 6)])
    await produce(settings, settings.topic("game-events"), json_records("team", events))
    # Red: 600 in minute 0 (first). Blue: 300, never. Green: 420 when the window
    # first fires; each late reading of the burst (within the 2 min lateness)
    # re-fires it, and the fourth (+80) takes it to 500: an update, awarded once.
    got = await outputs(settings, "team-powerups", 2)
    assert sorted(
        (o["team"], o["window_start_ms"] - BASE, o["bubbles"], o["timing"]) for o in got
    ) == [
        ("green", 0, 500, "update"),
        ("red", 0, 600, "first"),
    ]
