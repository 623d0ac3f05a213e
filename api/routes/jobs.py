"""The operations view: every stage's partitions across the app (``GET /jobs``).

The worker asked answers for its own partitions and asks each peer for theirs
(``service/jobs.py``); ``python -m eddy status`` prints this as a table.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from eddy.api.errors import PROBLEM_RESPONSES, BadRequestError
from eddy.redact import redact_all

router = APIRouter(tags=["operations"])


@runtime_checkable
class JobsBackend(Protocol):
    async def jobs(self, scope: Literal["all", "local"]) -> dict[str, Any]: ...


class Owner(BaseModel):
    worker_id: str | None = Field(description="Null when the owner does not answer.")
    endpoint: str | None = Field(description="Its REST API, from the group assignment.")


class PartitionJob(BaseModel):
    partition: int
    owner: Owner | None = Field(description="Null while no worker owns it.")
    state: Literal["running", "restoring", "unassigned", "unreachable"]
    error: str | None = Field(description="Why the partition is not running, if known.")
    committed_offsets: dict[str, int] = Field(description="Per input topic, last checkpoint.")
    end_offsets: dict[str, int | None] = Field(
        description="Per input topic, the last stable offset as of the last fetch."
    )
    lag: int | None = Field(description="Records not committed yet, over the inputs.")
    watermark_ms: int | None = Field(description="Null until the first record.")
    last_commit_ms: int | None = Field(
        description="Wall-clock ms of the last checkpoint on its owner; null before one."
    )
    latency_ms: float | None = Field(
        description="Latest latency marker: fetch to visible output (eddy_latency_marker_seconds)."
    )
    records_in: int | None = Field(description="Processed since the partition opened there.")
    records_out: int | None = Field(description="Sent since the partition opened there.")


class StageJob(BaseModel):
    stage: str
    agent: str = Field(description="The agent the stage is part of.")
    inputs: list[str]
    partition_count: int
    partitions: list[PartitionJob]


class WorkerRef(BaseModel):
    worker_id: str | None
    endpoint: str
    reachable: bool
    error: str | None


class StoredCut(BaseModel):
    id: str
    created_ms: int
    location: str


class Jobs(BaseModel):
    app_id: str
    served_by: str
    now_ms: int
    complete: bool = Field(description="Every partition is reported by the worker owning it.")
    workers: list[WorkerRef]
    stages: list[StageJob]
    last_savepoint: StoredCut | None = Field(description="Newest complete savepoint.")
    last_snapshot: StoredCut | None = Field(description="Newest complete snapshot.")
    errors: list[str] = Field(description="Parts of the view that could not be read.")


def _backend(request: Request) -> JobsBackend:
    backend = request.app.state.backend
    if not isinstance(backend, JobsBackend):
        raise BadRequestError("this server does not run stages")
    return backend


@router.get("/jobs", response_model=Jobs, responses={400: PROBLEM_RESPONSES[400]})
async def jobs(
    request: Request,
    scope: Annotated[
        Literal["all", "local"],
        Query(description="all: every worker's partitions (asking the others); local: this one's"),
    ] = "all",
) -> dict[str, Any]:
    """Stages (each with its agent), partitions, owners, lag, watermarks, last
    commit, latency markers, and the newest savepoint and snapshot. A worker that
    does not answer shows as ``unreachable`` (with the error) instead of failing
    the whole answer."""
    # Endpoints (EDDY_API_ADVERTISED_URL) and roots in errors may carry credentials.
    answer: dict[str, Any] = redact_all(await _backend(request).jobs(scope))
    return answer
