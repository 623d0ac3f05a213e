"""State snapshots for batch analytics (docs/snapshots.md): take one, list them.

``POST /snapshots`` is the one write-like route: it changes no state, it exports
it. Workers call it on each other to take their parts of one snapshot.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Protocol, runtime_checkable

from fastapi import APIRouter, Body, Request
from pydantic import BaseModel, Field, field_validator

from api.errors import BadRequestError
from service.snapshot.layout import ID_PATTERN, check_id

router = APIRouter(tags=["snapshots"])


@runtime_checkable
class SnapshotBackend(Protocol):
    async def take_snapshot(self, snapshot_id: str | None, fan_out: bool) -> dict[str, Any]: ...


class SnapshotRequest(BaseModel):
    snapshot_id: str | None = Field(
        None,
        pattern=ID_PATTERN.pattern,
        description="Set by the worker that fans a snapshot out; leave empty.",
    )
    fan_out: bool = Field(True, description="Also ask every other worker of the app.")

    @field_validator("snapshot_id")
    @classmethod
    def _real_time(cls, value: str | None) -> str | None:
        # The pattern lets through month 43: a 422 here, not a 500 mid-export.
        return None if value is None else check_id(value)


class WorkerPart(BaseModel):
    worker_id: str | None = None
    worker: str | None = None
    error: str | None = None
    partitions: list[dict[str, Any]]


class SnapshotTaken(BaseModel):
    snapshot_id: str
    complete: bool = Field(description="Every partition of every pipeline is in it.")
    missing: list[str] = Field(description="pipeline-partition parts nobody exported.")
    location: str
    rows: int | None
    workers: list[WorkerPart]


def _backend(request: Request) -> SnapshotBackend:
    backend = request.app.state.backend
    if not isinstance(backend, SnapshotBackend):
        raise BadRequestError("this server does not take snapshots")
    return backend


@router.post("/snapshots", response_model=SnapshotTaken)
async def take_snapshot(
    request: Request, body: Annotated[SnapshotRequest | None, Body()] = None
) -> dict[str, Any]:
    """Take a consistent snapshot of the app's state (every worker's partitions,
    each at a commit boundary) and publish it as Parquet with a manifest."""
    body = body or SnapshotRequest()
    # Shielded: a client that gives up must not cancel an export half-way.
    return await asyncio.shield(_backend(request).take_snapshot(body.snapshot_id, body.fan_out))
