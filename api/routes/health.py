"""Liveness and readiness, for Kubernetes probes and ``make run``.

A 503 is a problem body like every other error (RFC 9457), with what the 200
says as extension members: the worker, and for readiness each stage's state."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from eddy.api.deps import BackendDep
from eddy.api.errors import problem
from eddy.api.schemas import Health, Readiness
from eddy.app.web import Problem

router = APIRouter(tags=["health"])


@router.get(
    "/healthz",
    response_model=Health,
    responses={
        503: {
            "model": Problem,
            "description": "A part of the worker has died; worker_id names the worker",
        }
    },
)
async def healthz(request: Request, backend: BackendDep) -> JSONResponse:
    if not backend.is_live():
        detail = f"a loop of worker {backend.worker_id} has died"
        return problem(503, detail, request, worker_id=backend.worker_id)
    return JSONResponse(Health(status="ok", worker_id=backend.worker_id).model_dump())


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={
        503: {
            "model": Problem,
            "description": "Partitions are still restoring, or an ingest process is not "
            "running; ready, worker_id and stages say which, as the 200 does",
        }
    },
)
async def readyz(request: Request, backend: BackendDep) -> JSONResponse:
    """Ready once every owned partition is restored from its changelog."""
    ready, stages = backend.readiness()
    body = Readiness(ready=ready, worker_id=backend.worker_id, stages=stages).model_dump()
    if not ready:
        return problem(503, _not_ready(stages), request, **body)
    return JSONResponse(body)


def _not_ready(stages: dict[str, Any]) -> str:
    waiting = sorted(name for name, stage in stages.items() if not stage.get("ready"))
    if not waiting:
        return "not ready: an ingest process is not running, or not live"
    return f"not ready: {', '.join(waiting)} restoring"
