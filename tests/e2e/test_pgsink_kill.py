"""The PostgreSQL sink across a crash: a worker killed with SIGKILL while it writes
leaves, once restarted and drained, exactly the rows of a run without faults."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from service.settings import Settings
from tests.e2e.test_restore import SENSORS, _feed, encoded, readings
from tests.support.kafka import create_topics, unique_settings, wait_until
from tests.support.oracle import expected_windows
from tests.support.postgres import rows_of
from tests.support.processes import WorkerProcess
from tools.chaos import reference
from tools.chaos.kafkaio import GroupLag

pytestmark = pytest.mark.e2e

PIPELINES = ("sensor_averages", "postgres_sink")
TABLES = ("sensor_window_averages", "sensor_latest")


async def drained(settings: Settings) -> bool:
    """Every group of the app committed all of its input (averages included)."""
    lag = GroupLag(
        settings.bootstrap_servers,
        reference.groups(settings),
        settings.partitions,
        reference.transactional_inputs(settings),
    )
    positions = await lag.positions()
    return positions is not None and all(behind == 0 for _, behind in positions.values())


async def test_a_sink_killed_mid_run_writes_the_rows_of_a_clean_run(
    tmp_path: Path,
    postgres_dsn: str,
    fresh_schema: Callable[[], str],
) -> None:
    clean = unique_settings(
        tmp_path / "clean",
        pipelines=PIPELINES,
        postgres_dsn=postgres_dsn,
        postgres_schema=fresh_schema(),
    )
    # Same readings, an app of its own; small batches and slower commits, so the
    # kill lands with rows in PostgreSQL whose input offsets never committed.
    crashed = unique_settings(
        tmp_path / "crashed",
        readings_topic=clean.readings_topic,
        pipelines=PIPELINES,
        postgres_dsn=postgres_dsn,
        postgres_schema=fresh_schema(),
        sink_max_batch_rows=7,
        commit_interval_ms=300,
    )
    assert (clean.exactly_once, crashed.exactly_once) == (True, True)
    data = readings(12_000, seed=21)
    expected = expected_windows(data, size_ms=5_000, bound_ms=1_000, partitions=6)
    await create_topics(clean)
    await create_topics(crashed)

    async def rows(settings: Settings, table: str = TABLES[0]) -> list[tuple[Any, ...]]:
        return await rows_of(postgres_dsn, settings.postgres_schema, table)

    workers = [
        WorkerProcess(clean, tmp_path / "clean.log"),
        WorkerProcess(crashed, tmp_path / "crashed-1.log"),
    ]
    try:
        for worker in workers:
            worker.wait_ready()
        feed = asyncio.create_task(_feed(clean, encoded(data), chunk=500, pause_s=0.5))

        async def some_rows_written() -> bool:
            try:
                return len(await rows(crashed)) >= 60
            except asyncpg.UndefinedTableError:  # before the sink's first write migrates
                return False

        await wait_until(some_rows_written, timeout_s=120, every_s=0.1)
        workers[1].stop(signal.SIGKILL)
        rows_at_kill = len(await rows(crashed))
        fed_at_kill = feed.done()
        workers[1] = WorkerProcess(crashed, tmp_path / "crashed-2.log")
        workers[1].wait_ready()
        await feed

        async def done() -> bool:
            counts = [len(await rows(s)) for s in (clean, crashed)]
            if counts != [len(expected.windows)] * 2:
                return False
            return await drained(clean) and await drained(crashed)

        await wait_until(done, timeout_s=180, every_s=0.5)
        resumed = workers[1].status()["pipelines"]["sensor_averages"]["records_in"]
        tables = {s.app_id: {t: await rows(s, t) for t in TABLES} for s in (clean, crashed)}
    finally:
        for worker in workers:
            worker.stop()

    # The kill came mid-run: some rows written, the input not all produced, and the
    # restarted worker resumed from a commit of the killed one, not from scratch.
    assert 0 < rows_at_kill < len(expected.windows)
    assert not fed_at_kill
    assert 0 < resumed < len(data)
    assert tables[crashed.app_id] == tables[clean.app_id]
    windows = tables[clean.app_id][TABLES[0]]
    assert len(windows) == len(expected.windows)
    for sensor_id, start_ms, _, count, _, _, high, timing in windows:
        want = expected.summary((sensor_id, start_ms))
        assert (count, high, timing) == (want["count"], want["max"], "first")
    latest = tables[clean.app_id][TABLES[1]]
    assert [row[0] for row in latest] == sorted(SENSORS)
    newest = {s: max(start for k, start in expected.windows if k == s) for s in SENSORS}
    assert {row[0]: row[1] for row in latest} == newest
