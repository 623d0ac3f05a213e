"""``eddy worker --processes N`` on the real broker: ingest processes share the
partitions behind one query process, which answers every key on one port from
committed state, with 503 while a partition restores, and survives the loss of
an ingest process."""

from __future__ import annotations

import asyncio
import collections
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from service.app.queries import partition_for
from service.plane.status import reports_dir
from service.settings import Settings
from tests.e2e.test_restore import BASE_MS, SENSORS, averages_topic, encoded, readings
from tests.support.kafka import create_topics, produce, read_all, readings_topic, unique_settings
from tests.support.oracle import expected_windows
from tests.support.processes import WorkerProcess

pytestmark = pytest.mark.e2e
STAGE = "sensor_averages"


def start(settings: Settings, tmp_path: Path, processes: int = 2) -> WorkerProcess:
    return WorkerProcess(settings, tmp_path / "worker.log", "--processes", str(processes))


def ingest_pid(settings: Settings, index: int) -> int | None:
    """The pid ingest process ``index`` reports to the query process (None: none now)."""
    path = reports_dir(settings.state_dir / settings.app_id / ".query") / f"{index}.json"
    try:
        return int(orjson.loads(path.read_bytes())["pid"])
    except FileNotFoundError:
        return None


def alive_pid(settings: Settings, index: int) -> int:
    pid = ingest_pid(settings, index)
    assert pid is not None, f"ingest process {index} reports nothing"
    assert alive(pid), f"ingest process {index} is not running"
    return pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def niceness(pid: int) -> int:
    """A process's nice value (``/proc/<pid>/stat``, the field after the priority)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[16])


def owners(worker: WorkerProcess) -> dict[int, tuple[str, str | None, str]]:
    """Each partition's owner (worker id, endpoint) and state, from GET /jobs."""
    jobs = worker.get("/jobs").json()
    stage = next(s for s in jobs["stages"] if s["stage"] == STAGE)
    return {
        row["partition"]: (
            (row["owner"] or {}).get("worker_id") or "",
            (row["owner"] or {}).get("endpoint"),
            row["state"],
        )
        for row in stage["partitions"]
    }


def expected_answer(expected: Any, sensor: str) -> list[tuple[int, int, float, float]]:
    return sorted(
        (start, *(expected.summary((sensor, start))[f] for f in ("count", "min", "max")))
        for (s, start) in expected.windows
        if s == sensor
    )


def summary(windows: list[dict[str, Any]]) -> list[tuple[int, int, float, float]]:
    return [(w["window_start_ms"], w["count"], w["min"], w["max"]) for w in windows]


async def until(check: Any, timeout_s: float = 60.0, every_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        await asyncio.sleep(every_s)
    raise AssertionError(f"not met within {timeout_s} s (last: {last!r})")


async def test_two_ingest_processes_split_the_partitions_and_one_port_answers_every_key(
    tmp_path: Path,
) -> None:
    settings = unique_settings(tmp_path, ingest_niceness=3)
    data = readings(6_000, seed=21)
    expected = expected_windows(data, size_ms=5_000, bound_ms=1_000, partitions=6)
    worker = start(settings, tmp_path)
    try:
        worker.wait_ready()
        await produce(settings, readings_topic(settings), encoded(data))
        await read_all(settings, averages_topic(settings), min_records=len(expected.windows))

        def complete() -> bool:
            return all(
                summary(worker.get(f"/sensors/{s}/windows", limit=1_000).json()["windows"])
                == expected_answer(expected, s)
                for s in SENSORS
            )

        await until(complete)
        found = owners(worker)
        ids = {worker_id for worker_id, _, _ in found.values()}
        assert ids == {f"{settings.worker_id}-p0", f"{settings.worker_id}-p1"}, found
        # Both processes advertise the one port: peers forward there, never to them.
        assert {endpoint for _, endpoint, _ in found.values()} == {worker.base}
        assert all(state == "running" for _, _, state in found.values())
        status = worker.status()["stages"][STAGE]
        assert status["partitions"] == list(range(6))
        assert status["ready"]
        assert worker.get("/readyz").json()["ready"] is True
        await until(lambda: worker.status()["stages"][STAGE]["records_in"] == len(data))
        metrics = worker.get("/metrics").text
        assert f'eddy_records_in_total{{stage="{STAGE}"}} {float(len(data))}' in metrics
        assert f'eddy_assigned_partitions{{stage="{STAGE}"}} 6.0' in metrics
        pids = [alive_pid(settings, 0), alive_pid(settings, 1)]
        # The ingest processes yield the CPU to the query process (EDDY_INGEST_NICENESS).
        assert [niceness(pid) for pid in pids] == [niceness(worker.process.pid) + 3] * 2
    finally:
        assert worker.stop() == 0
    assert not any(alive(pid) for pid in pids), "ingest processes outlived the worker"


async def test_queries_hammering_the_port_change_no_result_and_see_only_committed_windows(
    tmp_path: Path,
) -> None:
    settings = unique_settings(tmp_path)
    data = readings(30_000, seed=8)
    expected = expected_windows(data, size_ms=5_000, bound_ms=1_000, partitions=6)
    await create_topics(settings)
    worker = start(settings, tmp_path)
    answered: list[dict[str, Any]] = []
    statuses: collections.Counter[int] = collections.Counter()
    stop = asyncio.Event()

    async def hammer(offset: int) -> None:
        async with httpx.AsyncClient(base_url=worker.base, timeout=10) as client:
            for n in range(offset, 10**9):
                if stop.is_set():
                    return
                sensor = SENSORS[n % len(SENSORS)]
                answer = await client.get(f"/sensors/{sensor}/windows", params={"limit": 1_000})
                statuses[answer.status_code] += 1
                if answer.status_code == 200:
                    answered.append(answer.json())

    try:
        worker.wait_ready()
        hammers = [asyncio.create_task(hammer(i)) for i in range(6)]
        rows = encoded(data)
        for begin in range(0, len(rows), 1_000):
            await produce(settings, readings_topic(settings), rows[begin : begin + 1_000])
            await asyncio.sleep(0.05)
        records = await read_all(
            settings, averages_topic(settings), min_records=len(expected.windows), timeout_s=120
        )
        await asyncio.sleep(1)  # queries on the final state too
        stop.set()
        await asyncio.gather(*hammers)
    finally:
        stop.set()
        assert worker.stop() == 0
    # Ingest under the queries: every window exactly once, as the recomputation says.
    results = [orjson.loads(r.value) for r in records]
    committed = {(r["sensor_id"], r["window_start_ms"]): r for r in results}
    assert len(committed) == len(results), "duplicate windows"
    assert set(committed) == set(expected.windows)
    for key, result in committed.items():
        want = expected.summary(key)
        assert (result["count"], result["min"], result["max"]) == (
            want["count"],
            want["min"],
            want["max"],
        )
    # Every window a query returned is one the output topic committed, as committed.
    assert statuses[200] > 200, statuses
    assert set(statuses) <= {200, 404, 409, 503}, statuses
    fields = ("count", "avg", "min", "max", "timing")
    for answer in answered:
        for window in answer["windows"]:
            result = committed.get((window["sensor_id"], window["window_start_ms"]))
            assert result is not None, f"a query returned an uncommitted window: {window}"
            assert [window[f] for f in fields] == [result[f] for f in fields]


def many_sensor_readings(sensors: int) -> list[tuple[str, int, float]]:
    """Two readings in one window for each of many sensors (much state to restore),
    then a reading an hour later on every partition, which closes every window."""
    rows = [
        (f"sensor_{n}", BASE_MS + k * 1_000 + n % 1_000, 20.0 + k)
        for n in range(sensors)
        for k in (0, 1)
    ]
    closers: dict[int, str] = {}
    for n in range(sensors):
        closers.setdefault(partition_for(f"sensor_{n}", 6), f"sensor_{n}")
    return rows + [(s, BASE_MS + 3_600_000, 0.0) for s in closers.values()]


async def test_a_restoring_partition_answers_503_with_retry_after(tmp_path: Path) -> None:
    settings = unique_settings(tmp_path)
    data = many_sensor_readings(20_000)
    expected = expected_windows(data, size_ms=5_000, bound_ms=1_000, partitions=6)
    sensor = "sensor_7"
    first = start(settings, tmp_path)
    try:
        first.wait_ready()
        await produce(settings, readings_topic(settings), encoded(data))
        await read_all(settings, averages_topic(settings), min_records=len(expected.windows))
        before = await until(
            lambda: (
                (r := first.get(f"/sensors/{sensor}/windows")).status_code == 200
                and r.json()["windows"]
            )
        )
    finally:
        assert first.stop() == 0
    shutil.rmtree(settings.state_dir)  # every partition restores from its changelog

    second = start(settings, tmp_path)
    seen: list[httpx.Response] = []
    try:
        async with httpx.AsyncClient(base_url=second.base, timeout=10) as client:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    answer = await client.get(f"/sensors/{sensor}/windows")
                except httpx.TransportError:
                    await asyncio.sleep(0.02)  # not listening yet
                    continue
                seen.append(answer)
                if answer.status_code == 200:
                    break
                await asyncio.sleep(0.02)
    finally:
        assert second.stop() == 0
    assert seen
    assert seen[-1].status_code == 200
    assert seen[-1].json()["windows"] == before
    unavailable = [r for r in seen if r.status_code == 503]
    assert {r.status_code for r in seen} == {200, 503}
    assert all(r.headers["retry-after"] for r in unavailable)
    assert all(r.headers["content-type"] == "application/problem+json" for r in unavailable)
    restoring = [r for r in unavailable if "is being restored" in r.json()["detail"]]
    assert restoring, [r.json()["detail"] for r in unavailable]
    assert restoring[0].json()["partition"] == partition_for(sensor, 6)


async def test_a_killed_ingest_process_leaves_the_others_running_and_its_partitions_move(
    tmp_path: Path,
) -> None:
    settings = unique_settings(tmp_path, session_timeout_ms=6_000, num_standby_replicas=0)
    data = readings(30_000, seed=4)
    expected = expected_windows(data, size_ms=5_000, bound_ms=1_000, partitions=6)
    await create_topics(settings)
    worker = start(settings, tmp_path)
    try:
        worker.wait_ready()
        survivor, victim = alive_pid(settings, 0), alive_pid(settings, 1)
        rows = encoded(data)
        half = len(rows) // 2
        await produce(settings, readings_topic(settings), rows[:half])
        await until(lambda: worker.status()["stages"][STAGE]["records_in"] >= half // 2)
        theirs = {p for p, (wid, _, _) in owners(worker).items() if wid.endswith("-p1")}
        assert theirs, owners(worker)

        def served_again(owner: str) -> bool:
            # By the survivor, or (on a loaded machine the restarted process may join
            # the rebalance that moves them) by the killed one's successor.
            restarted = ingest_pid(settings, 1) not in (None, victim)
            return owner == f"{settings.worker_id}-p0" or restarted

        os.kill(victim, signal.SIGKILL)
        # After the session timeout the group gives its partitions to the survivor,
        # before the killed process starts again.
        moved = await until(
            lambda: (
                (o := owners(worker))
                and all(o[p][2] == "running" and served_again(o[p][0]) for p in theirs)
                and o
            ),
            timeout_s=60,
            every_s=0.1,
        )
        assert alive(survivor), "the other ingest process went on"
        assert moved
        await produce(settings, readings_topic(settings), rows[half:])
        records = await read_all(
            settings, averages_topic(settings), min_records=len(expected.windows), timeout_s=120
        )
        # The killed process was started again and took its share back.
        await until(lambda: (pid := ingest_pid(settings, 1)) not in (None, victim) and alive(pid))
        await until(lambda: {w for w, _, _ in owners(worker).values()} == {
            f"{settings.worker_id}-p0", f"{settings.worker_id}-p1"}, timeout_s=90)  # fmt: skip

        def every_key_answered() -> bool:
            return all(
                (r := worker.get(f"/sensors/{s}/windows", limit=1_000)).status_code == 200
                and summary(r.json()["windows"]) == expected_answer(expected, s)
                for s in SENSORS
            )

        await until(every_key_answered)
        assert alive_pid(settings, 0) == survivor
    finally:
        assert worker.stop() == 0
    results = [orjson.loads(r.value) for r in records]
    keys = [(r["sensor_id"], r["window_start_ms"]) for r in results]
    assert len(keys) == len(set(keys)), "duplicates after the kill"
    assert set(keys) == set(expected.windows)
