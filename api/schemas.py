"""Response schemas: what clients can rely on (they appear in OpenAPI at /docs)."""

from __future__ import annotations

from typing import Literal, Protocol

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


class _Page(Protocol):
    @property
    def partition(self) -> int: ...
    @property
    def watermark_ms(self) -> int | None: ...
    @property
    def committed_offsets(self) -> dict[str, int]: ...


class Freshness(BaseModel):
    served_by: str = Field(description="The worker that answered.")
    partition: int
    watermark_ms: int | None = Field(description="Event-time watermark of the partition.")
    committed_offsets: dict[str, int] = Field(
        description="Input offsets the answer reflects (committed state only)."
    )

    @classmethod
    def of(cls, served_by: str, page: _Page) -> Freshness:
        """How fresh a page of committed state is (every paged query returns one)."""
        return cls(
            served_by=served_by,
            partition=page.partition,
            watermark_ms=page.watermark_ms,
            committed_offsets=page.committed_offsets,
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
