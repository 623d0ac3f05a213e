"""sensor_averages' window results, upserted into PostgreSQL.

Reads ``sensor-averages`` and keeps two tables in ``EDDY_POSTGRES_SCHEMA``:
``sensor_window_averages`` (one row per sensor and window; an ``update`` of a
window replaces its ``first`` row) and ``sensor_latest`` (per sensor, the window
with the greatest start). Each upsert is idempotent, so a replay after a crash
writes the same rows again: exactly-once without two-phase commit.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from eddy import Migration, PostgresUpsert, Topic, Upsert
from eddy.examples.app import app
from eddy.examples.settings import SinkSettings

COLUMNS = (
    "sensor_id",
    "window_start_ms",
    "window_end_ms",
    "count",
    "avg",
    "min",
    "max",
    "timing",
)
# A late update of a window counts every reading of the first result and more, so
# ``count`` orders the versions of one window: a stale row never replaces a newer one.
TABLES = (
    Upsert(
        "sensor_window_averages", COLUMNS, key=("sensor_id", "window_start_ms"), version=("count",)
    ),
    Upsert("sensor_latest", COLUMNS, key=("sensor_id",), version=("window_start_ms", "count")),
)

# The sink's tables. No wall-clock
# columns: after a crash and replay the rows must equal a run without faults.
SENSOR_SINK: tuple[Migration, ...] = (
    Migration(
        1,
        "sensor window averages and latest stats per sensor",
        """
        CREATE TABLE {schema}.sensor_window_averages (
            sensor_id text NOT NULL,
            window_start_ms bigint NOT NULL,
            window_end_ms bigint NOT NULL,
            count bigint NOT NULL,
            avg double precision NOT NULL,
            min double precision NOT NULL,
            max double precision NOT NULL,
            timing text NOT NULL,
            PRIMARY KEY (sensor_id, window_start_ms)
        );
        CREATE TABLE {schema}.sensor_latest (
            sensor_id text PRIMARY KEY,
            window_start_ms bigint NOT NULL,
            window_end_ms bigint NOT NULL,
            count bigint NOT NULL,
            avg double precision NOT NULL,
            min double precision NOT NULL,
            max double precision NOT NULL,
            timing text NOT NULL
        );
        """,
    ),
)


class WindowAverage(BaseModel):
    """One record of ``sensor-averages`` (agents/sensor_averages.py)."""

    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)

    sensor_id: Annotated[str, Field(min_length=1, max_length=200)]
    window_start_ms: Annotated[StrictInt, Field(ge=-(2**53), le=2**53)]
    window_end_ms: Annotated[StrictInt, Field(ge=-(2**53), le=2**53)]
    count: Annotated[StrictInt, Field(ge=1, le=2**62)]
    avg: float
    min: float
    max: float
    timing: Literal["first", "update"]


WINDOW_AVERAGES = Topic("sensor-averages", WindowAverage, key="sensor_id")


def upsert_to(dsn: str, schema: str, *, max_batch_rows: int = 5_000) -> PostgresUpsert:
    """Where the sink writes (also what the tests and the benchmark write through)."""
    return PostgresUpsert(
        dsn=dsn,
        schema=schema,
        tables=TABLES,
        migrations=SENSOR_SINK,
        max_batch_rows=max_batch_rows,
    )


@app.define(settings=SinkSettings, default=False)
def postgres_sink(s: SinkSettings) -> None:
    target = upsert_to(
        s.postgres_dsn.get_secret_value(), s.postgres_schema, max_batch_rows=s.sink_max_batch_rows
    )
    app.stream(WINDOW_AVERAGES).sink(target)
