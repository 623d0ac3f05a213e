"""Prometheus metrics and a JSON status summary."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from eddy.api.deps import BackendDep

router = APIRouter(tags=["operations"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(backend: BackendDep) -> Response:
    body, content_type = backend.metrics_text()
    return Response(content=body, media_type=content_type)


class StageStatus(BaseModel):
    agent: str = Field(description="The agent the stage is part of.")
    ready: bool
    partitions: list[int]
    restoring: list[int]
    watermarks_ms: dict[str, int] = Field(description="Per partition with data.")
    min_watermark_lag_ms: int | None
    max_watermark_lag_ms: int | None
    records_in: float
    windows_emitted: float
    late_records: float
    dead_letters: float
    commits: float


class Status(BaseModel):
    worker_id: str
    now_ms: int
    stages: dict[str, StageStatus] = Field(description="Per stage running here.")


@router.get("/status", response_model=Status)
async def status(backend: BackendDep) -> dict[str, Any]:
    """Counters and watermarks in one JSON document (what ``make run`` prints)."""
    return backend.status()
