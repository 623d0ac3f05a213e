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

from eddy import examples
from eddy.settings import Settings
from tests.e2e.test_restore import SENSORS, encoded, readings
from tests.support.kafka import (
    TEST_AGENT_SETTINGS,
    create_topics,
    produce,
    readings_topic,
    unique_settings,
    wait_until,
)
from tests.support.oracle import expected_windows
from tests.support.postgres import rows_of
from tests.support.processes import WorkerProcess, agent_env
from tools.chaos.kafkaio import GroupLag

pytestmark = pytest.mark.e2e

AGENTS = ("sensor_averages", "postgres_sink")
TABLES = ("sensor_window_averages", "sensor_latest")


async def drained(settings: Settings) -> bool:
    """Every group of the app committed all of its input (averages included)."""
    built = examples.app.build(settings, overrides=TEST_AGENT_SETTINGS)
    groups = {f"{settings.app_id}.{stage.name}": tuple(stage.sources) for stage in built.stages}
    # Inputs another stage writes in transactions (sensor-averages, read by the sink).
    written = {topic for stage in built.stages for topic in stage.output_topics}
    transactional = {t for sources in groups.values() for t in sources if t in written}
    lag = GroupLag(settings.bootstrap_servers, groups, settings.partitions, transactional)
    positions = await lag.positions()
    return positions is not None and all(behind == 0 for _, behind in positions.values())


async def test_a_sink_killed_mid_run_writes_the_rows_of_a_clean_run(
    tmp_path: Path,
    postgres_dsn: str,
    fresh_schema: Callable[[], str],
) -> None:
    clean = unique_settings(tmp_path / "clean", agents=AGENTS)
    # Same readings, an app of its own; small batches and slower commits, so the
    # kill lands with rows in PostgreSQL whose input offsets never committed.
    crashed = unique_settings(tmp_path / "crashed", agents=AGENTS, commit_interval_ms=300)
    # The sink's settings (agents/settings.py: SinkSettings), as its workers read them.
    schemas = {clean.app_id: fresh_schema(), crashed.app_id: fresh_schema()}
    sink_env = {
        app_id: agent_env(postgres_dsn=postgres_dsn, postgres_schema=schema)
        for app_id, schema in schemas.items()
    }
    sink_env[crashed.app_id].update(agent_env(sink_max_batch_rows=7))
    assert (clean.exactly_once, crashed.exactly_once) == (True, True)
    data = readings(12_000, seed=21)
    expected = expected_windows(data, size_ms=5_000, bound_ms=1_000, partitions=6)
    await create_topics(clean)
    await create_topics(crashed)

    async def rows(settings: Settings, table: str = TABLES[0]) -> list[tuple[Any, ...]]:
        return await rows_of(postgres_dsn, schemas[settings.app_id], table)

    def worker(settings: Settings, log: str) -> WorkerProcess:
        return WorkerProcess(settings, tmp_path / log, **sink_env[settings.app_id])

    workers = [worker(clean, "clean.log"), worker(crashed, "crashed-1.log")]
    try:
        for each in workers:
            each.wait_ready()
        # Each app has its topics (EDDY_TOPIC_PREFIX): both get the same readings.
        feed = asyncio.create_task(_feed([clean, crashed], encoded(data), chunk=500, pause_s=0.5))

        async def some_rows_written() -> bool:
            try:
                return len(await rows(crashed)) >= 60
            except asyncpg.UndefinedTableError:  # before the sink's first write migrates
                return False

        await wait_until(some_rows_written, timeout_s=120, every_s=0.1)
        workers[1].stop(signal.SIGKILL)
        rows_at_kill = len(await rows(crashed))
        fed_at_kill = feed.done()
        workers[1] = worker(crashed, "crashed-2.log")
        workers[1].wait_ready()
        await feed

        async def done() -> bool:
            counts = [len(await rows(s)) for s in (clean, crashed)]
            if counts != [len(expected.windows)] * 2:
                return False
            return await drained(clean) and await drained(crashed)

        await wait_until(done, timeout_s=180, every_s=0.5)
        resumed = workers[1].status()["stages"]["sensor_averages"]["records_in"]
        tables = {s.app_id: {t: await rows(s, t) for t in TABLES} for s in (clean, crashed)}
    finally:
        for each in workers:
            each.stop()

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


async def _feed(
    apps: list[Settings], rows: list[tuple[bytes, bytes]], chunk: int, pause_s: float
) -> None:
    """Each chunk to the readings topic of every app, then a pause."""
    for start in range(0, len(rows), chunk):
        for settings in apps:
            await produce(settings, readings_topic(settings), rows[start : start + chunk])
        await asyncio.sleep(pause_s)
