"""A generic read-only view of every pipeline's tables, and the watermarks."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from api.deps import BackendDep
from api.errors import PROBLEM_RESPONSES, BadRequestError
from api.params import MAX_TIME_MS, FromMs, Limit, ToMs, page_limit
from api.schemas import Freshness
from service.app.queries import UnknownKeyError
from service.eventtime import MIN_WATERMARK

router = APIRouter(tags=["tables"])
Name = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._-]+$")]
Key = Annotated[str, Path(min_length=1, max_length=200)]


class PipelineTables(BaseModel):
    name: str
    tables: list[str] = Field(description="Tables with entries in partitions served here.")


class Pipelines(BaseModel):
    pipelines: list[PipelineTables]
    served_by: str


class TableEntry(BaseModel):
    window_start_ms: int | None = Field(description="None for tables keyed by key alone.")
    window_end_ms: int | None
    value: Any


class TableEntries(BaseModel):
    pipeline: str
    table: str
    key: str
    layout: str = Field(description="by_key or by_key_and_window")
    entries: list[TableEntry]
    next_from_ms: int | None = Field(description="Ask again from here for the next page.")
    freshness: Freshness


class PartitionWatermark(BaseModel):
    partition: int
    watermark_ms: int | None = Field(description="None before the first record.")
    lag_ms: int | None = Field(description="Wall clock minus the watermark.")


class Watermarks(BaseModel):
    now_ms: int
    pipelines: dict[str, list[PartitionWatermark]] = Field(
        description="Partitions served by this worker."
    )
    served_by: str


@router.get("/pipelines", response_model=Pipelines)
async def pipelines(backend: BackendDep) -> Pipelines:
    """The pipelines this worker runs and their tables."""
    found = backend.pipelines()
    return Pipelines(
        pipelines=[PipelineTables(name=n, tables=t) for n, t in sorted(found.items())],
        served_by=backend.worker_id,
    )


@router.get(
    "/pipelines/{pipeline}/tables/{table}/keys/{key}",
    response_model=TableEntries,
    responses={s: PROBLEM_RESPONSES[s] for s in (400, 404, 503)},
)
async def table_entries(
    backend: BackendDep,
    pipeline: Name,
    table: Name,
    key: Key,
    from_ms: FromMs = 0,
    to_ms: ToMs = MAX_TIME_MS,
    limit: Limit = None,
) -> TableEntries:
    """A key's entries in any table: its value, or its windows starting in
    ``[from_ms, to_ms)``, oldest first, in pages."""
    limit = page_limit(backend, from_ms, to_ms, limit)
    if pipeline not in backend.pipelines():
        raise UnknownKeyError(f"pipeline {pipeline!r} does not run on this worker")
    try:
        page = backend.table_entries(pipeline, table, key, from_ms, to_ms, limit)
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None
    return TableEntries(
        pipeline=pipeline,
        table=table,
        key=key,
        layout=page.layout,
        entries=[
            TableEntry(
                window_start_ms=None if e.window is None else e.window.start_ms,
                window_end_ms=None if e.window is None else e.window.end_ms,
                value=e.value,
            )
            for e in page.entries
        ],
        next_from_ms=page.next_from_ms,
        freshness=Freshness.of(backend.worker_id, page.freshness),
    )


@router.get("/watermarks", response_model=Watermarks)
async def watermarks(backend: BackendDep) -> Watermarks:
    """Each partition's event-time watermark here, and how far it is behind the wall
    clock (a growing lag: a stalled or idle input)."""
    now_ms = backend.now_ms()
    result: dict[str, list[PartitionWatermark]] = {}
    for pipeline, marks in sorted(backend.watermarks().items()):
        result[pipeline] = [
            PartitionWatermark(
                partition=p,
                watermark_ms=None if _unset(w) else w,
                lag_ms=None if _unset(w) else now_ms - w,
            )
            for p, w in sorted(marks.items())
        ]
    return Watermarks(now_ms=now_ms, pipelines=result, served_by=backend.worker_id)


def _unset(watermark_ms: int) -> bool:
    return watermark_ms == MIN_WATERMARK  # nothing seen yet
