"""PostgreSQL sink benchmark: upserts/s of window results into the local PostgreSQL.

    python -m bench.pgsink [--rows 200000] [--batch-rows 5000] [--partitions 1]

Writes bench/results/pgsink.json. No Kafka: the rows go through the sink's own
write path (:meth:`eddy.pipeline.pgsink.PostgresSink.upsert`: dedupe, one
transaction per batch, executemany per table) in batches of ``--batch-rows``
(EDDY_SINK_MAX_BATCH_ROWS' default), first into empty tables, then again as a
replay after a crash would (every row an ON CONFLICT update that changes nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import asyncpg

from bench.machine import write_result
from eddy.examples.postgres_sink import WINDOW_AVERAGES, WindowAverage, upsert_to
from eddy.pipeline.pgmigrate import quote
from eddy.pipeline.pgsink import PostgresSink
from eddy.pipeline.source import Source
from tools import postgres

SCHEMA = "bench_pgsink"
WINDOW_MS = 5_000
BASE_MS = 1_700_000_000_000


def results(rows: int, sensors: int) -> list[WindowAverage]:
    """``rows`` window results, in the order sensor_averages emits them (by window)."""
    return [
        WindowAverage(
            sensor_id=f"sensor_{n % sensors}",
            window_start_ms=BASE_MS + n // sensors * WINDOW_MS,
            window_end_ms=BASE_MS + n // sensors * WINDOW_MS + WINDOW_MS,
            count=5 + n % 3,
            avg=40.0 + n % 30 / 3,
            min=35.0,
            max=55.0,
            timing="first",
        )
        for n in range(rows)
    ]


def sink_stage(dsn: str, batch_rows: int) -> PostgresSink:
    """The postgres_sink agent's stage, as the app compiles it (agents/postgres_sink.py),
    into ``SCHEMA``: the same tables, migrations and batching."""
    target = upsert_to(dsn, SCHEMA, max_batch_rows=batch_rows)
    source = Source(WINDOW_AVERAGES.name, WINDOW_AVERAGES.codec)
    return PostgresSink("postgres_sink", source, target)


async def write_all(
    sink: PostgresSink, values: list[WindowAverage], batch_rows: int, partitions: int
) -> float:
    """Seconds to upsert ``values``: ``partitions`` writers at once, each with its own
    sensors, like a worker's tasks on a topic keyed by sensor."""
    shares: list[list[WindowAverage]] = [[] for _ in range(partitions)]
    for value in values:
        shares[int(value.sensor_id.rpartition("_")[2]) % partitions].append(value)

    async def one(share: list[WindowAverage]) -> None:
        for start in range(0, len(share), batch_rows):
            await sink.upsert(share[start : start + batch_rows])

    started = time.perf_counter()
    await asyncio.gather(*(one(share) for share in shares))
    return time.perf_counter() - started


async def measure(
    dsn: str, rows: int, sensors: int, batch_rows: int, partitions: int
) -> dict[str, Any]:
    values = results(rows, sensors)
    sink = sink_stage(dsn, batch_rows)
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(f"DROP SCHEMA IF EXISTS {quote(SCHEMA)} CASCADE")
        first_s = await write_all(sink, values, batch_rows, partitions)
        replay_s = await write_all(sink, values, batch_rows, partitions)
        stored = await connection.fetchval(
            f"SELECT count(*) FROM {quote(SCHEMA)}.sensor_window_averages"
        )
        assert stored == rows, f"{stored} rows stored, {rows} written"
        await connection.execute(f"DROP SCHEMA {quote(SCHEMA)} CASCADE")
    finally:
        await sink.close()
        await connection.close()
    return {
        "first_write_s": round(first_s, 2),
        "first_write_records_per_s": round(rows / first_s),
        "replay_s": round(replay_s, 2),
        "replay_records_per_s": round(rows / replay_s),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.pgsink", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--sensors", type=int, default=1_000)
    parser.add_argument("--batch-rows", type=int, default=5_000)
    parser.add_argument("--partitions", type=int, default=1, help="writers at once")
    parser.add_argument("--output", default="bench/results/pgsink.json")
    args = parser.parse_args(argv)
    started_server = postgres.ensure_running()
    try:
        figures = asyncio.run(
            measure(postgres.dsn(), args.rows, args.sensors, args.batch_rows, args.partitions)
        )
    finally:
        if started_server:
            postgres.stop()
    result: dict[str, Any] = {
        "what": "window results upserted by the postgres_sink write path into "
        "sensor_window_averages + sensor_latest (one transaction per batch), then replayed",
        "records": args.rows,
        "sensors": args.sensors,
        "batch_rows": args.batch_rows,
        "partitions": args.partitions,
        **figures,
        "postgres": postgres.dsn(),
    }
    write_result(args.output, result)
    print(
        f"postgres sink: {args.rows:,} window results in batches of {args.batch_rows:,}: "
        f"{figures['first_write_records_per_s']:,} records/s written, "
        f"{figures['replay_records_per_s']:,} records/s replayed "
        f"({args.partitions} writer(s); each also upserts sensor_latest) -> {args.output}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
