"""The sink against a real PostgreSQL: migrations under concurrency, upserts that
give the same rows however often and in whatever order batches are replayed, and
the logic's batching (Kafka is in tests/e2e/test_pgsink_kill.py)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg
import orjson
import pytest

from eddy.examples.postgres_sink import (
    SENSOR_SINK,
    TABLES,
    WINDOW_AVERAGES,
    WindowAverage,
    upsert_to,
)
from eddy.pipeline.pgmigrate import migrate, quote
from eddy.pipeline.pgsink import PostgresSink, SinkLogic
from eddy.pipeline.source import Source
from tests.support.fakes import CollectingOutput, FakeRecord
from tests.support.postgres import fresh_schema, postgres_dsn, rows_of  # noqa: F401

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session", autouse=True)
def kafka_broker() -> None:
    """Overrides tests/integration's broker fixture: this module needs PostgreSQL only."""


def sink(dsn: str, schema: str, max_batch_rows: int = 5_000) -> PostgresSink:
    target = upsert_to(dsn, schema, max_batch_rows=max_batch_rows)
    return PostgresSink("postgres_sink", Source("averages", WINDOW_AVERAGES.codec), target)


def results(seed: int) -> list[WindowAverage]:
    """What sensor_averages emits with allowed lateness: per sensor, windows in
    order, and now and then a late update of an earlier window (more readings)."""
    rng = random.Random(seed)
    out = []
    for sensor in (f"sensor_{i}" for i in range(5)):
        counts: dict[int, int] = {}
        for w in range(40):
            start = w * 5_000
            counts[start] = rng.randint(1, 9)
            out.append(_average(sensor, start, counts[start], "first", rng))
            if w and rng.random() < 0.3:
                late = rng.choice(sorted(counts))
                counts[late] += rng.randint(1, 3)
                out.append(_average(sensor, late, counts[late], "update", rng))
    return out


def _average(sensor: str, start: int, count: int, timing: str, rng: random.Random) -> WindowAverage:
    low = round(rng.uniform(30, 60), 2)
    return WindowAverage.model_validate(
        {
            "sensor_id": sensor,
            "window_start_ms": start,
            "window_end_ms": start + 5_000,
            "count": count,
            "avg": low + 5.5,
            "min": low,
            "max": low + 11,
            "timing": timing,
        }
    )


async def tables_of(dsn: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    return {t.table: await rows_of(dsn, schema, t.table) for t in TABLES}


def expected(values: Sequence[WindowAverage]) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of a run without faults, written straight from the definition."""
    windows: dict[tuple[str, int], WindowAverage] = {}
    latest: dict[str, WindowAverage] = {}
    for v in values:
        windows[(v.sensor_id, v.window_start_ms)] = v  # in order: updates come later
        best = latest.get(v.sensor_id)
        if best is None or (v.window_start_ms, v.count) >= (best.window_start_ms, best.count):
            latest[v.sensor_id] = v
    window_table, latest_table = TABLES
    return {
        window_table.table: sorted(window_table.row(v) for v in windows.values()),
        latest_table.table: sorted(latest_table.row(v) for v in latest.values()),
    }


async def test_migrations_apply_once_when_workers_start_together(
    postgres_dsn: str,  # noqa: F811
    fresh_schema: Callable[[], str],  # noqa: F811
) -> None:
    schema = fresh_schema()
    connections = [await asyncpg.connect(postgres_dsn) for _ in range(5)]
    try:
        applied = await asyncio.gather(*(migrate(c, schema, SENSOR_SINK) for c in connections))
        again = await migrate(connections[0], schema, SENSOR_SINK)
        versions = await connections[0].fetch(
            f"SELECT version, name FROM {quote(schema)}.eddy_schema_migrations ORDER BY version"
        )
    finally:
        for connection in connections:
            await connection.close()
    # Exactly one of the five applied each migration; the others found it done.
    assert sorted(len(a) for a in applied) == [0, 0, 0, 0, len(SENSOR_SINK)]
    assert again == []
    assert [tuple(v) for v in versions] == [(m.version, m.name) for m in SENSOR_SINK]
    assert await tables_of(postgres_dsn, schema) == {t.table: [] for t in TABLES}


async def test_replayed_batches_in_any_order_leave_the_rows_of_a_clean_run(
    postgres_dsn: str,  # noqa: F811
    fresh_schema: Callable[[], str],  # noqa: F811
) -> None:
    values = results(seed=4)
    clean, replayed = sink(postgres_dsn, fresh_schema()), sink(postgres_dsn, fresh_schema())
    try:
        await clean.upsert(values)
        rng = random.Random(9)
        # Crash-and-replay: batches written again from earlier points, some twice,
        # and a zombie's stale batch landing after the newer rows.
        position = 0
        while position < len(values):
            end = min(len(values), position + rng.randint(1, 60))
            await replayed.upsert(values[position:end])
            replay = rng.random() < 0.4
            position = max(0, position - rng.randint(1, 40)) if replay else end
        stale = rng.sample(values, 50)
        await replayed.upsert(stale)
        await replayed.upsert(list(reversed(values)))
        want = expected(values)
        assert await tables_of(postgres_dsn, clean.schema) == want
        assert await tables_of(postgres_dsn, replayed.schema) == want
        assert len(want["sensor_latest"]) == 5
        assert any(row[-1] == "update" for row in want["sensor_window_averages"])
    finally:
        await clean.close()
        await replayed.close()


async def test_latest_moves_only_to_a_newer_window_or_version(
    postgres_dsn: str,  # noqa: F811
    fresh_schema: Callable[[], str],  # noqa: F811
) -> None:
    target = sink(postgres_dsn, fresh_schema())
    rng = random.Random(1)

    async def latest() -> tuple[Any, ...]:
        (row,) = await rows_of(postgres_dsn, target.schema, "sensor_latest")
        return (row[1], row[3], row[7])  # window_start_ms, count, timing

    try:
        await target.upsert([_average("s", 10_000, 4, "first", rng)])
        await target.upsert([_average("s", 5_000, 6, "first", rng)])  # an older window
        assert await latest() == (10_000, 4, "first")
        await target.upsert([_average("s", 10_000, 5, "update", rng)])
        assert await latest() == (10_000, 5, "update")
        await target.upsert([_average("s", 10_000, 4, "first", rng)])  # stale, replayed
        assert await latest() == (10_000, 5, "update")
        await target.upsert([_average("s", 15_000, 1, "first", rng)])
        assert await latest() == (15_000, 1, "first")
        windows = await rows_of(postgres_dsn, target.schema, "sensor_window_averages")
        assert [(r[1], r[3], r[7]) for r in windows] == [
            (5_000, 6, "first"),
            (10_000, 5, "update"),
            (15_000, 1, "first"),
        ]
    finally:
        await target.close()


async def test_the_logic_writes_when_the_batch_is_full_and_at_each_flush(
    postgres_dsn: str,  # noqa: F811
    fresh_schema: Callable[[], str],  # noqa: F811
) -> None:
    target = sink(postgres_dsn, fresh_schema(), max_batch_rows=3)
    logic = SinkLogic(target)
    out = CollectingOutput()
    values = results(seed=2)[:5]
    try:
        for offset, value in enumerate(values[:3]):
            await logic.process_async(FakeRecord(offset, orjson.dumps(value.model_dump())), out)
        await logic.process_async(FakeRecord(3, b"not json"), out)
        windows = await rows_of(postgres_dsn, target.schema, "sensor_window_averages")
        # Written as the batch filled up, before any flush.
        assert (windows, logic.buffered) == (expected(values[:3])["sensor_window_averages"], 0)
        for offset, value in enumerate(values[3:], start=4):
            await logic.process_async(FakeRecord(offset, orjson.dumps(value.model_dump())), out)
        assert logic.buffered == 2
        await logic.flush(out)
        assert await tables_of(postgres_dsn, target.schema) == expected(values)
        # sink.rows counts the rows sent to both tables; one timing per transaction.
        sent = sum(len(t.dedupe(batch)) for t in TABLES for batch in (values[:3], values[3:]))
        assert out.events == {"sink.rows": sent, "observed.sink.batch": 2}
        assert len(out.dead) == 1
    finally:
        await target.close()


async def test_an_unreachable_database_fails_the_checkpoint_not_the_record() -> None:
    """A full buffer that cannot be written must not fail the record that filled it
    (the runtime would count that against the record and dead-letter it): the
    write is left to the checkpoint's flush, whose failure reopens the task."""
    nowhere = sink("postgresql://eddy@127.0.0.1:1/eddy", "eddy", max_batch_rows=2)
    logic = SinkLogic(nowhere)
    out = CollectingOutput()
    for offset, value in enumerate(results(seed=3)[:3]):
        await logic.process_async(FakeRecord(offset, orjson.dumps(value.model_dump())), out)
    assert logic.buffered == 3
    with pytest.raises(ConnectionRefusedError):
        await logic.flush(out)
    assert out.events == {}
    logic.cancel()
    assert logic.buffered == 0
