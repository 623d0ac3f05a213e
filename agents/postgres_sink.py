"""sensor_averages' window results, upserted into PostgreSQL (issue #12).

Reads ``sensor-averages`` and keeps two tables in ``EDDY_POSTGRES_SCHEMA``:
``sensor_window_averages`` (one row per sensor and window; an ``update`` of a
window replaces its ``first`` row) and ``sensor_latest`` (per sensor, the window
with the greatest start). Migrations: :data:`service.pipeline.pgmigrate.SENSOR_SINK`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from service.pipeline.pgmigrate import SENSOR_SINK
from service.pipeline.pgsink import PostgresSink, Upsert
from service.settings import Settings

NAME = "postgres_sink"
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


def build(settings: Settings) -> PostgresSink:
    if settings.postgres_dsn is None:  # the settings refuse this; kept for the type checker
        raise ValueError("postgres_sink needs EDDY_POSTGRES_DSN")
    return sensor_sink(
        settings.postgres_dsn.get_secret_value(),
        settings.postgres_schema,
        source=settings.averages_topic,
        max_batch_rows=settings.sink_max_batch_rows,
    )


def sensor_sink(
    dsn: str, schema: str, *, source: str = "sensor-averages", max_batch_rows: int = 5_000
) -> PostgresSink:
    """The sink of window averages into ``schema`` (also what the tests and the
    benchmark write through)."""
    return PostgresSink(
        name=NAME,
        source=source,
        value_type=WindowAverage,
        tables=TABLES,
        dsn=dsn,
        schema=schema,
        migrations=SENSOR_SINK,
        max_batch_rows=max_batch_rows,
    )
