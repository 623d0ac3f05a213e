"""Response schemas: what clients can rely on (they appear in OpenAPI at /docs)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Health(BaseModel):
    status: Literal["ok", "failing"]
    worker_id: str


class Readiness(BaseModel):
    ready: bool
    worker_id: str
    pipelines: dict[str, dict[str, object]]


class WindowOut(BaseModel):
    window_start_ms: int
    window_end_ms: int
    count: int
    avg: float
    min: float
    max: float
    timing: Literal["first", "update"] = "first"


class Freshness(BaseModel):
    served_by: str = Field(description="The worker that answered.")
    partition: int
    watermark_ms: int | None = Field(description="Event-time watermark of the partition.")
    committed_offsets: dict[str, int] = Field(
        description="Input offsets the answer reflects (committed state only)."
    )


class SensorWindows(BaseModel):
    sensor_id: str
    from_ms: int
    to_ms: int
    windows: list[WindowOut]
    next_from_ms: int | None = Field(
        description="Pass as from_ms to get the next page; null on the last page."
    )
    freshness: Freshness
