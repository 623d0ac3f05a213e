"""Workers as processes: restore from the changelog, and exactly-once across a crash."""

from __future__ import annotations

import asyncio
import random
import shutil
import signal
import time
from pathlib import Path

import orjson
import pytest

from eddy.settings import Settings
from tests.support.kafka import create_topics, produce, read_all, readings_topic, unique_settings
from tests.support.oracle import expected_windows
from tests.support.processes import WorkerProcess

pytestmark = pytest.mark.e2e

# An hour ago, on the hour: outputs carry event time as their Kafka timestamp, and a
# timestamp older than the broker's retention (7 days) could be deleted mid-test.
BASE_MS = (time.time_ns() // 3_600_000_000_000 - 1) * 3_600_000
SENSORS = [f"sensor_{i}" for i in range(1, 11)]


def readings(count: int, seed: int) -> list[tuple[str, int, float]]:
    rng = random.Random(seed)
    in_order = [
        (SENSORS[i % len(SENSORS)], BASE_MS + i * 20, round(rng.uniform(10, 100), 2))
        for i in range(count)
    ]
    shuffled = sorted(in_order, key=lambda r: r[1] + rng.randint(0, 1_000))
    closing = [(s, BASE_MS + count * 20 + 600_000, 0.0) for s in SENSORS]
    return shuffled + closing


def averages_topic(settings: Settings) -> str:
    """sensor_averages' output topic (``EDDY_TOPIC_PREFIX`` in front)."""
    return settings.topic("sensor-averages")


def encoded(rows: list[tuple[str, int, float]]) -> list[tuple[bytes, bytes]]:
    return [
        (s.encode(), orjson.dumps({"sensor_id": s, "timestamp_ms": t, "temperature": v}))
        for s, t, v in rows
    ]


def snapshot_of(worker: WorkerProcess) -> dict[str, list[dict[str, object]]]:
    answers = {}
    for sensor in SENSORS:
        response = worker.get(f"/sensors/{sensor}/windows", limit=1_000)
        assert response.status_code == 200, response.text
        answers[sensor] = response.json()["windows"]
    return answers


async def test_rest_answers_the_same_after_a_restart_with_the_state_wiped(
    tmp_path: Path,
) -> None:
    settings = unique_settings(tmp_path)
    data = readings(6_000, seed=3)
    first = WorkerProcess(settings, tmp_path / "first.log")
    try:
        first.wait_ready()
        await produce(settings, readings_topic(settings), encoded(data))
        expected = expected_windows(data, size_ms=5_000, bound_ms=1_000, partitions=6)
        await read_all(settings, averages_topic(settings), min_records=len(expected.windows))
        await _wait_committed(first, len(data))
        before = snapshot_of(first)
    finally:
        assert first.stop() == 0
    assert sum(len(w) for w in before.values()) == len(expected.windows)

    shutil.rmtree(settings.state_dir)
    second = WorkerProcess(settings, tmp_path / "second.log")
    try:
        second.wait_ready()
        assert snapshot_of(second) == before
        metrics = second.get("/metrics").text
        restored = [
            float(line.split()[-1])
            for line in metrics.splitlines()
            if line.startswith("eddy_restored_records_total")
        ]
        assert sum(restored) > 0, "state came back without a restore?"
    finally:
        assert second.stop() == 0


async def test_a_worker_killed_mid_stream_still_emits_each_window_exactly_once(
    tmp_path: Path,
) -> None:
    settings = unique_settings(tmp_path, commit_interval_ms=200)
    data = readings(30_000, seed=11)
    expected = expected_windows(data, size_ms=5_000, bound_ms=1_000, partitions=6)
    await create_topics(settings)

    first = WorkerProcess(settings, tmp_path / "first.log")
    first.wait_ready()
    feed = asyncio.create_task(_feed(settings, encoded(data), chunk=1_000, pause_s=0.1))
    await _wait_progress(first, records=10_000, commits=2)
    first.stop(signal.SIGKILL)  # no commit, no leave-group: a crash mid-stream
    await feed

    second = WorkerProcess(settings, tmp_path / "second.log")
    try:
        second.wait_ready()
        records = await read_all(
            settings, averages_topic(settings), min_records=len(expected.windows)
        )
        resumed = second.status()["stages"]["sensor_averages"]["records_in"]
    finally:
        second.stop()
    # The second worker resumed from the first one's last commit, not from scratch.
    assert 0 < resumed < len(data)
    results = [orjson.loads(r.value) for r in records]
    keys = [(r["sensor_id"], r["window_start_ms"]) for r in results]
    assert len(keys) == len(set(keys)), "duplicates after the crash"
    assert set(keys) == set(expected.windows)
    for result in results:
        want = expected.summary((result["sensor_id"], result["window_start_ms"]))
        assert (result["count"], result["max"]) == (want["count"], want["max"])


async def _feed(
    settings: Settings, rows: list[tuple[bytes, bytes]], chunk: int, pause_s: float
) -> None:
    for start in range(0, len(rows), chunk):
        await produce(settings, readings_topic(settings), rows[start : start + chunk])
        await asyncio.sleep(pause_s)


async def _wait_committed(worker: WorkerProcess, total: int, timeout_s: float = 60.0) -> None:
    async def done() -> bool:
        status = worker.status()["stages"]["sensor_averages"]
        return status["records_in"] >= total and status["commits"] > 0

    for _ in range(int(timeout_s / 0.2)):
        if await done():
            await asyncio.sleep(0.5)  # a few commit intervals
            return
        await asyncio.sleep(0.2)
    raise AssertionError("worker did not process everything")


async def _wait_progress(worker: WorkerProcess, records: int, commits: int) -> None:
    for _ in range(1_200):
        status = worker.status()["stages"]["sensor_averages"]
        if status["records_in"] >= records and status["commits"] >= commits:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no progress")
