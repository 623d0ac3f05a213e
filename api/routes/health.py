"""Liveness and readiness, for Kubernetes probes and ``make run``."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.deps import BackendDep
from api.schemas import Health, Readiness

router = APIRouter(tags=["health"])


@router.get(
    "/healthz",
    response_model=Health,
    responses={503: {"model": Health, "description": "A part of the worker has died"}},
)
async def healthz(backend: BackendDep) -> JSONResponse:
    live = backend.is_live()
    body = Health(status="ok" if live else "failing", worker_id=backend.worker_id)
    return JSONResponse(body.model_dump(), status_code=200 if live else 503)


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Partitions are still restoring"}},
)
async def readyz(backend: BackendDep) -> JSONResponse:
    """Ready once every owned partition is restored from its changelog."""
    ready, detail = backend.readiness()
    body = Readiness(ready=ready, worker_id=backend.worker_id, stages=detail)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)
