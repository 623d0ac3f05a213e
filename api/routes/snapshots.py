"""Snapshots (docs/snapshots.md) and savepoints (docs/savepoints.md): take one,
list them, show one, dispose of one; stop the app; follow an operation.

Taking one, and stopping, are long operations (every worker cuts its partitions
at a commit boundary and writes Parquet): the request answers 202 at once, with
``Location: /operations/{id}`` to poll, as Flink answers a savepoint trigger.
Listing, showing and disposing read the root every worker can reach. A broken
one (a manifest that cannot be used, or one leading outside the root) is listed
apart with the reason, and showing or disposing of it is a 409.
The workers use the routes under ``/internal`` among themselves; they are not
part of the API.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from fastapi import APIRouter, Body, HTTPException, Path, Query, Request, Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from eddy.api.errors import PROBLEM_RESPONSES, BadRequestError
from eddy.app.queries import UnknownKeyError
from eddy.app.web import Problem
from eddy.snapshot import catalog
from eddy.snapshot.layout import (
    ID_PATTERN,
    BrokenSnapshotError,
    SnapshotNotFoundError,
    check_id,
)

router = APIRouter()
internal = APIRouter(prefix="/internal", include_in_schema=False)
# The pattern lets through month 43: check_id makes that a 422, not a 500.
Id = Annotated[
    str,
    Path(pattern=ID_PATTERN.pattern, examples=["20260101T120000000Z"]),
    AfterValidator(check_id),
]
Kind = Literal["snapshot", "savepoint"]
BROKEN = {
    "model": Problem,
    "description": "Its manifest is broken (unreadable, not what Eddy writes, or naming "
    "something outside its folder): it is neither shown nor deleted",
}


@runtime_checkable
class OperationsBackend(Protocol):
    settings: Any
    operations: Any

    def start_snapshot(self, kind: Kind) -> Any: ...

    def start_stop(self, savepoint: bool) -> Any: ...

    async def take_part(self, kind: Kind, snapshot_id: str) -> dict[str, Any]: ...

    async def stop_phase(self, phase: Any) -> dict[str, Any]: ...


class PartitionPart(BaseModel):
    stage: str = Field(description="The stage the partition belongs to.")
    partition: int
    rows: int


class WorkerPart(BaseModel):
    worker_id: str | None = Field(None, description="Null if the worker did not answer.")
    worker: str | None = Field(None, description="Its API, when it did not answer.")
    error: str | None = None
    partitions: list[PartitionPart]


class Taken(BaseModel):
    """The result of a snapshot or savepoint operation."""

    id: str
    complete: bool = Field(description="Every partition of every stage is in it.")
    missing: list[str] = Field(description="stage-partition parts nobody exported.")
    location: str
    rows: int | None
    workers: list[WorkerPart]


class Stopped(BaseModel):
    """The result of a stop operation."""

    savepoint: Taken | None
    workers: list[dict[str, str]] = Field(description="Each worker and the phase it ran.")


class Operation(BaseModel):
    operation_id: str
    kind: Literal["snapshot", "savepoint", "stop"]
    status: Literal["running", "succeeded", "failed"]
    started_ms: int
    finished_ms: int | None
    error: str | None = Field(description="Why it failed.")
    result: Taken | Stopped | None = Field(description="When it succeeded.")


class TableSummary(BaseModel):
    rows: int
    version: int = Field(description="The state's schema version it was written with.")


class StageSummary(BaseModel):
    partitions: int
    rows: int
    tables: dict[str, TableSummary]
    committed_offsets: dict[str, dict[str, int]] = Field(description="Per partition, per input.")
    watermarks_ms: dict[str, int | None] = Field(description="Per partition.")


class Summary(BaseModel):
    id: str
    app_id: str
    created_ms: int
    rows: int
    location: str
    stages: dict[str, StageSummary]


class BrokenCut(BaseModel):
    id: str
    location: str
    reason: str = Field(description="Why it cannot be used.")


class Listing(BaseModel):
    items: list[Summary] = Field(description="Oldest first.")
    broken: list[BrokenCut] = Field(
        description="Those of this page's ids whose manifest cannot be used, oldest first: "
        "never shown, restored or disposed of."
    )
    next_after: str | None = Field(description="Pass as after= for the next page.")


class Disposed(BaseModel):
    id: str
    location: str = Field(description="Where it was.")


class StopRequest(BaseModel):
    # Strict and closed: a misspelt or mistyped field is a 422, not a stop without
    # the savepoint that was asked for.
    model_config = ConfigDict(strict=True, extra="forbid")

    savepoint: bool = Field(False, description="Take a final savepoint before stopping.")


def _backend(request: Request) -> OperationsBackend:
    backend = request.app.state.backend
    if not isinstance(backend, OperationsBackend):
        raise BadRequestError("this server runs no operations")
    return backend


def _accepted(response: Response, operation: Any) -> dict[str, Any]:
    response.headers["Location"] = f"/operations/{operation.operation_id}"
    return _operation(operation)


def _operation(operation: Any) -> dict[str, Any]:
    return {
        "operation_id": operation.operation_id,
        "kind": operation.kind,
        "status": operation.status,
        "started_ms": operation.started_ms,
        "finished_ms": operation.finished_ms,
        "error": operation.error,
        "result": operation.result,
    }


def _kind_routes(kind: Kind, doc: str) -> None:
    tags: list[str | Any] = [f"{kind}s"]

    async def take(request: Request, response: Response) -> dict[str, Any]:
        return _accepted(response, _backend(request).start_snapshot(kind))

    take.__doc__ = doc
    router.add_api_route(
        f"/{kind}s", take, methods=["POST"], status_code=202, response_model=Operation,
        tags=tags, name=f"take_{kind}", responses={400: PROBLEM_RESPONSES[400]},
    )  # fmt: skip

    async def listing(
        request: Request,
        after: Annotated[str | None, Query(pattern=ID_PATTERN.pattern)] = None,
        limit: Annotated[int, Query(ge=1, le=1_000)] = 100,
    ) -> dict[str, Any]:
        settings = _backend(request).settings
        found = await asyncio.to_thread(catalog.listing, settings, kind)
        found = [s for s in found if after is None or s["id"] > after]
        page = found[:limit]
        return {
            "items": [s for s in page if s["broken"] is None],
            "broken": [
                {"id": s["id"], "location": s["location"], "reason": s["broken"]}
                for s in page
                if s["broken"] is not None
            ],
            "next_after": page[-1]["id"] if len(found) > limit else None,
        }

    listing.__doc__ = f"The app's complete {kind}s, oldest first, in pages."
    router.add_api_route(
        f"/{kind}s", listing, methods=["GET"], response_model=Listing, tags=tags,
        name=f"list_{kind}s", responses={400: PROBLEM_RESPONSES[400]},
    )  # fmt: skip

    async def show(request: Request, found_id: Id) -> dict[str, Any]:
        settings = _backend(request).settings
        try:
            root, manifest = await asyncio.to_thread(
                catalog.locate, settings, kind, f"{settings.app_id}/{found_id}"
            )
        except SnapshotNotFoundError as exc:
            raise UnknownKeyError(str(exc)) from None
        except BrokenSnapshotError as exc:
            raise HTTPException(409, str(exc)) from None
        return catalog.summary(root, manifest)

    show.__doc__ = f"One {kind}: per stage its partitions, tables, offsets and watermarks."
    router.add_api_route(
        f"/{kind}s/{{found_id}}", show, methods=["GET"], response_model=Summary, tags=tags,
        name=f"show_{kind}", responses={404: PROBLEM_RESPONSES[404], 409: BROKEN},
    )  # fmt: skip

    async def dispose(request: Request, found_id: Id) -> dict[str, Any]:
        settings = _backend(request).settings
        try:
            location = await asyncio.to_thread(catalog.dispose, settings, kind, found_id)
        except SnapshotNotFoundError as exc:
            raise UnknownKeyError(str(exc)) from None
        except BrokenSnapshotError as exc:
            raise HTTPException(409, str(exc)) from None
        return {"id": found_id, "location": location}

    dispose.__doc__ = f"Delete one of the app's {kind}s."
    router.add_api_route(
        f"/{kind}s/{{found_id}}", dispose, methods=["DELETE"], response_model=Disposed,
        tags=tags, name=f"dispose_{kind}", responses={404: PROBLEM_RESPONSES[404], 409: BROKEN},
    )  # fmt: skip

    async def part(request: Request, found_id: Id) -> dict[str, Any]:
        # Shielded: a peer that gives up must not cancel an export half-way.
        return await asyncio.shield(_backend(request).take_part(kind, found_id))

    internal.add_api_route(f"/{kind}s/{{found_id}}", part, methods=["POST"])


_kind_routes(
    "snapshot",
    "Take a consistent snapshot of the app's state (every worker's partitions, each "
    "at a commit boundary) and publish it as Parquet with a manifest. Answers 202 at "
    "once; poll the Location.",
)
_kind_routes(
    "savepoint",
    "Take a savepoint: every partition's state, timers and watermark with the input "
    "offsets it matches. Never deleted automatically. Answers 202 at once; poll the "
    "Location.",
)


@router.post(
    "/stop", status_code=202, response_model=Operation, tags=["operations"],
    responses={400: PROBLEM_RESPONSES[400]},
)  # fmt: skip
async def stop(
    request: Request, response: Response, body: Annotated[StopRequest | None, Body()] = None
) -> dict[str, Any]:
    """Stop every worker of the app (each commits and leaves its groups), after a
    final savepoint with ``{"savepoint": true}``: processing stops first, so the
    savepoint is the last state. If the savepoint comes out incomplete the
    operation fails and the app keeps running."""
    body = body or StopRequest()
    return _accepted(response, _backend(request).start_stop(body.savepoint))


@router.get(
    "/operations/{operation_id}", response_model=Operation, tags=["operations"],
    responses={404: PROBLEM_RESPONSES[404]},
)  # fmt: skip
async def operation(
    request: Request,
    operation_id: Annotated[str, Path(pattern=r"^[0-9a-f]{32}$")],
) -> dict[str, Any]:
    """How a snapshot, savepoint or stop started on this worker is going."""
    found = _backend(request).operations.get(operation_id)
    if found is None:
        raise UnknownKeyError(f"no operation {operation_id} on this worker")
    return _operation(found)


@internal.post("/stop/{phase}")
async def stop_phase(request: Request, phase: Literal["hold", "release", "exit"]) -> Any:
    return await _backend(request).stop_phase(phase)
