"""A generic read-only view of every stage's tables, and the watermarks.

An agent runs as one or more stages (``service/app/plan.py``); these routes name
the stage, and each answer says which agent it belongs to."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from eddy.api.deps import BackendDep
from eddy.api.errors import PROBLEM_RESPONSES, BadRequestError
from eddy.api.params import MAX_TIME_MS, FromMs, Limit, ToMs, page_limit
from eddy.api.schemas import Freshness
from eddy.app.queries import UnknownKeyError
from eddy.eventtime import MIN_WATERMARK

router = APIRouter(tags=["tables"])
Name = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._-]+$")]
Key = Annotated[str, Path(min_length=1, max_length=200)]


class StageTables(BaseModel):
    stage: str
    agent: str = Field(description="The agent the stage is part of.")
    tables: list[str] = Field(description="Tables with entries in partitions served here.")


class Stages(BaseModel):
    stages: list[StageTables]
    served_by: str


class TableEntry(BaseModel):
    window_start_ms: int | None = Field(description="None for tables keyed by key alone.")
    window_end_ms: int | None
    value: Any


class TableEntries(BaseModel):
    stage: str
    agent: str
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


class StageWatermarks(BaseModel):
    agent: str
    partitions: list[PartitionWatermark] = Field(description="Partitions served here.")


class Watermarks(BaseModel):
    now_ms: int
    stages: dict[str, StageWatermarks] = Field(description="Per stage running here.")
    served_by: str


@router.get("/stages", response_model=Stages)
async def stages(backend: BackendDep) -> Stages:
    """The stages this worker runs, the agent of each, and their tables."""
    found = backend.stages()
    return Stages(
        stages=[
            StageTables(stage=name, agent=backend.agent_of(name), tables=tables)
            for name, tables in sorted(found.items())
        ],
        served_by=backend.worker_id,
    )


@router.get(
    "/stages/{stage}/tables/{table}/keys/{key}",
    response_model=TableEntries,
    responses={s: PROBLEM_RESPONSES[s] for s in (400, 404, 503)},
)
async def table_entries(
    backend: BackendDep,
    stage: Name,
    table: Name,
    key: Key,
    from_ms: FromMs = 0,
    to_ms: ToMs = MAX_TIME_MS,
    limit: Limit = None,
) -> TableEntries:
    """A key's entries in any table: its value, or its windows starting in
    ``[from_ms, to_ms)``, oldest first, in pages."""
    limit = page_limit(backend, from_ms, to_ms, limit)
    if stage not in backend.stages():
        raise UnknownKeyError(f"stage {stage!r} does not run on this worker")
    try:
        page = backend.table_entries(stage, table, key, from_ms, to_ms, limit)
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None
    return TableEntries(
        stage=stage,
        agent=backend.agent_of(stage),
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
    result: dict[str, StageWatermarks] = {}
    for stage, marks in sorted(backend.watermarks().items()):
        partitions = [
            PartitionWatermark(
                partition=p,
                watermark_ms=None if _unset(w) else w,
                lag_ms=None if _unset(w) else now_ms - w,
            )
            for p, w in sorted(marks.items())
        ]
        result[stage] = StageWatermarks(agent=backend.agent_of(stage), partitions=partitions)
    return Watermarks(now_ms=now_ms, stages=result, served_by=backend.worker_id)


def _unset(watermark_ms: int) -> bool:
    return watermark_ms == MIN_WATERMARK  # nothing seen yet
