"""Savepoints (docs/savepoints.md): take, list, show, dispose; stop the app.

Taking one and stopping go through the worker (they cut live state); listing,
showing and disposing read the savepoint root, which every worker can reach.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from fastapi import APIRouter, Body, HTTPException, Path, Request
from pydantic import BaseModel, Field

from api.errors import BadRequestError
from api.routes.snapshots import SnapshotRequest, SnapshotTaken
from service.savepoint import catalog
from service.savepoint.stop import SavepointIncompleteError
from service.snapshot.layout import ID_PATTERN, SnapshotNotFoundError

router = APIRouter(tags=["savepoints"])
SavepointId = Annotated[str, Path(pattern=ID_PATTERN.pattern, examples=["20260101T120000000Z"])]


@runtime_checkable
class SavepointBackend(Protocol):
    settings: Any

    async def take_savepoint(self, savepoint_id: str | None, fan_out: bool) -> dict[str, Any]: ...

    async def stop_app(self, savepoint: bool, phase: Any) -> dict[str, Any]: ...


class StopRequest(BaseModel):
    savepoint: bool = Field(False, description="Take a final savepoint before stopping.")
    phase: Literal["all", "hold", "release", "exit"] = Field(
        "all", description="Workers use the single phases among themselves; leave it."
    )


def _backend(request: Request) -> SavepointBackend:
    backend = request.app.state.backend
    if not isinstance(backend, SavepointBackend):
        raise BadRequestError("this server does not take savepoints")
    return backend


@router.post("/savepoints", response_model=SnapshotTaken)
async def take_savepoint(
    request: Request, body: Annotated[SnapshotRequest | None, Body()] = None
) -> dict[str, Any]:
    """Take a savepoint: every partition's state, timers and watermark with the input
    offsets it matches, each cut at a commit boundary. Never deleted automatically."""
    body = body or SnapshotRequest()
    backend = _backend(request)
    return await asyncio.shield(backend.take_savepoint(body.snapshot_id, body.fan_out))


@router.get("/savepoints")
async def list_savepoints(request: Request) -> list[dict[str, Any]]:
    """The app's complete savepoints, oldest first."""
    return await asyncio.to_thread(catalog.listing, _backend(request).settings)


@router.get("/savepoints/{savepoint_id}")
async def show_savepoint(request: Request, savepoint_id: SavepointId) -> dict[str, Any]:
    """One savepoint: per pipeline its partitions, tables (rows, schema version),
    committed input offsets and watermarks."""
    settings = _backend(request).settings
    try:
        root, manifest = await asyncio.to_thread(
            catalog.locate, settings, f"{settings.app_id}/{savepoint_id}"
        )
    except SnapshotNotFoundError as exc:
        raise HTTPException(404, str(exc)) from None
    return catalog.summary(root, manifest)


@router.delete("/savepoints/{savepoint_id}")
async def dispose_savepoint(request: Request, savepoint_id: SavepointId) -> dict[str, Any]:
    """Delete a savepoint (the only way one is ever deleted)."""
    settings = _backend(request).settings
    try:
        location = await asyncio.to_thread(catalog.dispose, settings, savepoint_id)
    except SnapshotNotFoundError as exc:
        raise HTTPException(404, str(exc)) from None
    return {"disposed": savepoint_id, "location": location}


@router.post("/stop")
async def stop(
    request: Request, body: Annotated[StopRequest | None, Body()] = None
) -> dict[str, Any]:
    """Stop every worker of the app (each commits and leaves its groups), after a
    final savepoint with ``{"savepoint": true}``: processing stops first, so the
    savepoint is the last state. 409 if the savepoint came out incomplete (the app
    then keeps running)."""
    body = body or StopRequest()
    try:
        return await asyncio.shield(_backend(request).stop_app(body.savepoint, body.phase))
    except SavepointIncompleteError as exc:
        raise HTTPException(409, str(exc)) from None
