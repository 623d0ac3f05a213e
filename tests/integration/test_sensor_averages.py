"""sensor_averages end to end on the real broker: what a user of the topics sees."""

from __future__ import annotations

import random
import time

import orjson
import pytest

from eddy.settings import Settings
from eddy.worker import Worker
from tests.support.kafka import produce, read_all, readings_topic, sensor_settings, wait_until
from tests.support.oracle import expected_windows

pytestmark = pytest.mark.integration

# An hour ago, on the hour: outputs carry event time as their Kafka timestamp, and a
# timestamp older than the broker's retention (7 days) could be deleted mid-test.
BASE_MS = (time.time_ns() // 3_600_000_000_000 - 1) * 3_600_000
SENSORS = [f"sensor_{i}" for i in range(1, 13)]


def reading(sensor: str, ts: int, temp: float) -> tuple[bytes, bytes]:
    body = {"sensor_id": sensor, "timestamp_ms": ts, "temperature": temp}
    return sensor.encode(), orjson.dumps(body)


def shuffled_within(readings: list[tuple[str, int, float]], bound_ms: int, seed: int) -> list:
    """Delay each reading by at most the watermark bound: disorder the bound allows."""
    rng = random.Random(seed)
    return sorted(readings, key=lambda r: r[1] + rng.randint(0, bound_ms))


@pytest.mark.parametrize(
    "settings", ["exactly_once", "at_least_once"], indirect=True, ids=lambda g: str(g)
)
async def test_windows_match_an_offline_recomputation(settings: Settings, worker: Worker) -> None:
    rng = random.Random(42)
    in_order = [
        (sensor, BASE_MS + step * 37 + i, round(rng.uniform(20, 90), 2))
        for step in range(1_200)
        for i, sensor in enumerate(SENSORS)
        if rng.random() < 0.8
    ]
    readings = shuffled_within(in_order, sensor_settings().watermark_bound_ms, seed=7)
    # One last reading per sensor, far ahead, pushes every partition's watermark
    # past the data's windows so all of them close.
    closing = [(s, BASE_MS + 3_600_000, 50.0) for s in SENSORS]
    await produce(settings, readings_topic(settings), [reading(*r) for r in readings + closing])

    expected = expected_windows(
        readings + closing,
        size_ms=sensor_settings().window_size_ms,
        bound_ms=sensor_settings().watermark_bound_ms,
        partitions=settings.partitions,
    )
    assert expected.late == []
    records = await read_all(
        settings, settings.topic("sensor-averages"), min_records=len(expected.windows)
    )
    results = [orjson.loads(r.value) for r in records]
    got = {(r["sensor_id"], r["window_start_ms"]): r for r in results}

    assert len(results) == len(got), "a window was emitted twice"
    assert got.keys() == expected.windows.keys()
    for key, result in got.items():
        want = expected.summary(key)
        assert (result["count"], result["min"], result["max"]) == (
            want["count"],
            want["min"],
            want["max"],
        )
        assert result["avg"] == pytest.approx(want["avg"], rel=1e-12)
        assert (
            result["window_end_ms"] - result["window_start_ms"] == sensor_settings().window_size_ms
        )
    assert sum(r["count"] for r in results) == len(readings)
    assert await read_all(settings, settings.topic("late-readings"), quiet_s=0.5) == []


async def test_late_readings_go_to_their_topic_and_are_counted(
    settings: Settings, worker: Worker
) -> None:
    on_time = [reading("sensor_1", BASE_MS + i * 100, 60.0) for i in range(100)]  # 0..9.9 s
    too_late = reading("sensor_1", BASE_MS + 1_000, 99.0)  # window [0, 5 s) closed long ago
    await produce(settings, readings_topic(settings), [*on_time, too_late])

    late = await read_all(settings, settings.topic("late-readings"), min_records=1)
    assert [orjson.loads(r.value)["temperature"] for r in late] == [99.0]
    assert dict(late[0].headers)["eddy.watermark_ms"] == str(BASE_MS + 9_900 - 1_001).encode()
    results = await read_all(settings, settings.topic("sensor-averages"), min_records=1)
    first = orjson.loads(results[0].value)
    assert (first["window_start_ms"], first["count"], first["max"]) == (BASE_MS, 50, 60.0)
    await wait_until(lambda: worker.status()["stages"]["sensor_averages"]["late_records"] == 1)


BAD_RECORDS: list[tuple[bytes | None, bytes | None, str]] = [
    (b"sensor_1", b"{not json", "malformed JSON"),
    (
        b"sensor_1",
        b'{"sensor_id": "sensor_1", "temperature": 70.0}',
        "timestamp_ms: Field required",
    ),
    (
        b"sensor_1",
        b'{"sensor_id": "sensor_1", "timestamp_ms": "soon", "temperature": 1}',
        "timestamp_ms: Input should be a valid integer",
    ),
    (
        b"sensor_1",
        b'{"sensor_id": "sensor_1", "timestamp_ms": 1, "temperature": NaN}',
        "temperature: nan is not a finite number",
    ),
    (
        b"sensor_1",
        b'{"sensor_id": "sensor_1", "timestamp_ms": 1, "temperature": 1e999}',
        "temperature: inf is not a finite number",
    ),
    (b"sensor_1", b"[1, 2, 3]", "Input should be an object"),
    (b"sensor_1", b"\xff\xfe\x00garbage", "malformed JSON"),
    (b"sensor_1", None, "empty value (tombstone)"),
    (
        b"sensor_1",
        b'{"sensor_id": "", "timestamp_ms": 1, "temperature": 3}',
        "sensor_id: String should",
    ),
]


async def test_bad_records_go_to_dead_letters_and_good_ones_are_aggregated(
    settings: Settings, worker: Worker
) -> None:
    good = [reading("sensor_1", BASE_MS + i * 500, 40.0 + i) for i in range(20)]  # 0..9.5 s
    stream: list[tuple[bytes | None, bytes | None]] = []
    for i, (key, value, _) in enumerate(BAD_RECORDS):
        stream += [good[i], (key, value)]
    stream += good[len(BAD_RECORDS) :]
    await produce(settings, readings_topic(settings), stream)

    dead = await read_all(settings, settings.dead_letters, min_records=len(BAD_RECORDS))
    assert len(dead) == len(BAD_RECORDS)
    by_value = {r.value: dict(r.headers) for r in dead}
    for _key, value, reason in BAD_RECORDS:
        headers = by_value[value]
        assert headers["eddy.reason"].decode().startswith(reason.split(":")[0])
        assert reason in headers["eddy.reason"].decode()
        assert headers["eddy.source.topic"] == readings_topic(settings).encode()
        assert headers["eddy.pipeline"] == b"sensor_averages"
    source_offsets = sorted(int(dict(r.headers)["eddy.source.offset"]) for r in dead)
    assert source_offsets == [2 * i + 1 for i in range(len(BAD_RECORDS))]

    results = await read_all(settings, settings.topic("sensor-averages"), min_records=1)
    first = orjson.loads(results[0].value)
    assert first["count"] == 10  # every good reading of [0, 5 s) is in, no bad one
    assert first["avg"] == pytest.approx(sum(40.0 + i for i in range(10)) / 10)
    status = worker.status()["stages"]["sensor_averages"]
    assert status["dead_letters"] == len(BAD_RECORDS)


@pytest.mark.parametrize(
    "settings", [{"window_firings_per_checkpoint": 3}], indirect=True, ids=["3-per-checkpoint"]
)
async def test_windows_one_watermark_closes_are_fired_over_several_checkpoints_exactly_once(
    settings: Settings, worker: Worker
) -> None:
    """Aligned windows of every key close at one watermark; a checkpoint holds at
    most EDDY_WINDOW_FIRINGS_PER_CHECKPOINT of them (a million keys' would not fit
    in memory), so the worker fires them over several. Each result comes out once."""
    sensors = [f"sensor_{i}" for i in range(120)]
    readings = [(sensor, BASE_MS + 1_000, 20.0) for sensor in sensors]
    await produce(settings, readings_topic(settings), [reading(*r) for r in readings])
    runtime = worker.runtimes["sensor_averages"]
    registry = worker.metrics.registry

    def sample(name: str) -> float:
        return registry.get_sample_value(name, {"stage": "sensor_averages"}) or 0.0

    def all_committed() -> bool:
        done = sample("eddy_records_in_total") == len(readings)
        return done and not any(task.has_work for task in runtime.tasks.values())

    await wait_until(all_committed)
    before = sample("eddy_commits_total")
    # Each sensor's next reading an hour later: the first on each partition closes
    # the windows of every sensor there.
    closing = [(s, BASE_MS + 3_600_000, 50.0) for s in sensors]
    await produce(settings, readings_topic(settings), [reading(*r) for r in closing])
    expected = expected_windows(
        readings + closing,
        size_ms=sensor_settings().window_size_ms,
        bound_ms=sensor_settings().watermark_bound_ms,
        partitions=settings.partitions,
    )
    records = await read_all(
        settings, settings.topic("sensor-averages"), min_records=len(expected.windows)
    )
    results = [orjson.loads(r.value) for r in records]
    keys = [(r["sensor_id"], r["window_start_ms"]) for r in results]
    assert len(keys) == len(set(keys)), "a window was emitted twice"
    assert set(keys) == set(expected.windows)
    assert len(keys) == len(sensors)
    # 120 windows closed at once: at most 3 per checkpoint, so at least 40 of them.
    assert sample("eddy_commits_total") - before >= len(sensors) / 3
