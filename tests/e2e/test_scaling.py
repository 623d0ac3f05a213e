"""Several workers share the partitions; joining and failing keep state and exactness."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import orjson
import pytest

from tests.e2e.test_restore import SENSORS, averages_topic, encoded, readings, snapshot_of
from tests.support.kafka import create_topics, produce, read_all, readings_topic, unique_settings
from tests.support.oracle import expected_windows
from tests.support.processes import WorkerProcess

pytestmark = pytest.mark.e2e


def restored(worker: WorkerProcess) -> float:
    return _metric(worker, "eddy_restored_records_total")


def _metric(worker: WorkerProcess, name: str) -> float:
    lines = worker.get("/metrics").text.splitlines()
    return sum(float(line.split()[-1]) for line in lines if line.startswith(name))


async def _settle(workers: list[WorkerProcess], total: int) -> None:
    for _ in range(600):
        statuses = [w.status()["stages"]["sensor_averages"] for w in workers]
        owned = sorted(p for s in statuses for p in s["partitions"])
        ready = owned == list(range(6)) and all(s["ready"] for s in statuses)
        if ready and sum(s["records_in"] for s in statuses) >= total:
            return
        await asyncio.sleep(0.2)
    raise AssertionError("the workers did not settle")


async def test_a_joining_worker_shares_the_work_and_a_standby_takes_over_a_crash(
    tmp_path: Path,
) -> None:
    settings = unique_settings(tmp_path, num_standby_replicas=1, session_timeout_ms=6_000)
    data = readings(24_000, seed=5)
    body, closing = data[: -len(SENSORS)], data[-len(SENSORS) :]
    thirds = [
        body[: len(body) // 3],
        body[len(body) // 3 : 2 * len(body) // 3],
        body[2 * len(body) // 3 :],
    ]
    await create_topics(settings)

    a = WorkerProcess(settings, tmp_path / "a.log", EDDY_STATE_DIR=str(tmp_path / "a"))
    b: WorkerProcess | None = None
    try:
        a.wait_ready()
        await produce(settings, readings_topic(settings), encoded(thirds[0]))
        await _settle([a], len(thirds[0]))

        b = WorkerProcess(settings, tmp_path / "b.log", EDDY_STATE_DIR=str(tmp_path / "b"))
        b.wait_ready()
        await produce(settings, readings_topic(settings), encoded(thirds[1]))
        await _settle([a, b], 0)
        owned_by_a = a.status()["stages"]["sensor_averages"]["partitions"]
        owned_by_b = b.status()["stages"]["sensor_averages"]["partitions"]
        assert len(owned_by_a) == len(owned_by_b) == 3, (owned_by_a, owned_by_b)
        await asyncio.sleep(2)  # let b's standby copies of a's partitions catch up
        assert _metric(b, "eddy_standby_records_total") > 0
        before = restored(b)

        a.stop(signal.SIGKILL)
        await produce(settings, readings_topic(settings), encoded(thirds[2] + closing))
        expected = expected_windows(data, size_ms=5_000, bound_ms=1_000, partitions=6)
        records = await read_all(
            settings, averages_topic(settings), min_records=len(expected.windows), timeout_s=90
        )
        assert b.status()["stages"]["sensor_averages"]["partitions"] == list(range(6))
        # The standby had a's state: taking over restored little or nothing.
        assert restored(b) - before < 200
        results = [orjson.loads(r.value) for r in records]
        keys = [(r["sensor_id"], r["window_start_ms"]) for r in results]
        assert len(keys) == len(set(keys)), "duplicates after the takeover"
        assert set(keys) == set(expected.windows)
        answers = snapshot_of(b)
        assert sum(len(w) for w in answers.values()) == len(expected.windows)
    finally:
        a.stop()
        if b is not None:
            b.stop()
