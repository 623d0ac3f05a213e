"""A plain Faust agent on the same workload: ``python -m bench.faust_app worker``.

The usual Faust way of a windowed average: a ``Record`` for the reading, a
``Table`` made ``.tumbling(...)`` and ``.relative_to_field(...)`` the reading's
event time, and an agent that reads the current window's value and writes it back
with the reading folded in (count, sum, min, max) -- one changelog record per
update, as every Faust table write is. RocksDB store, like Eddy's.

Faust windows are unit-free numbers, so the window size is 5,000 in the reading's
milliseconds. ``expires`` is a day: Faust expires windows by the wall clock, and
the readings are two hours old. The table emits nothing by itself; the harness
reads its changelog afterwards (last value per window) and checks every window's
count, average, minimum and maximum against the recomputation.

Configured by environment variables (``BENCH_FAUST_*``) because Faust owns the
command line; stopped by SIGTERM (Faust commits and leaves the group).
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import faust

BOOTSTRAP = os.environ.get("BENCH_FAUST_BOOTSTRAP", "127.0.0.1:9092")
APP_ID = os.environ.get("BENCH_FAUST_APP_ID", "bench-faust")
INPUT = os.environ.get("BENCH_FAUST_INPUT", "bench-readings")
PARTITIONS = int(os.environ.get("BENCH_FAUST_PARTITIONS", "6"))
GUARANTEE = os.environ.get("BENCH_FAUST_GUARANTEE", "at_least_once")
COMMIT_INTERVAL_S = float(os.environ.get("BENCH_FAUST_COMMIT_INTERVAL_S", "2.8"))
DATA_DIR = os.environ.get("BENCH_FAUST_DATA_DIR", ".eddy/bench/faust")
TABLE = "averages"


class Reading(faust.Record, serializer="json"):
    sensor_id: str
    timestamp_ms: int
    temperature: float


app = faust.App(
    APP_ID,
    broker=f"kafka://{BOOTSTRAP}",
    store="rocksdb://",
    datadir=DATA_DIR,
    topic_partitions=PARTITIONS,
    processing_guarantee=GUARANTEE,
    broker_commit_interval=COMMIT_INTERVAL_S,
    web_enabled=False,
    consumer_auto_offset_reset="earliest",
)
readings = app.topic(INPUT, key_type=str, value_type=Reading, partitions=PARTITIONS)
averages = (
    app.Table(TABLE, default=dict, partitions=PARTITIONS)
    .tumbling(5_000, expires=timedelta(days=1).total_seconds() * 1_000)
    .relative_to_field(Reading.timestamp_ms)  # type: ignore[arg-type]
)


@app.agent(readings)
async def average(stream: Any) -> None:
    async for reading in stream:
        current = averages[reading.sensor_id].value()
        t = reading.temperature
        if current:
            current = {
                "count": current["count"] + 1,
                "sum": current["sum"] + t,
                "min": min(current["min"], t),
                "max": max(current["max"], t),
            }
        else:
            current = {"count": 1, "sum": t, "min": t, "max": t}
        averages[reading.sensor_id] = current


def changelog_topic(app_id: str) -> str:
    return f"{app_id}-{TABLE}-changelog"


if __name__ == "__main__":
    app.main()
