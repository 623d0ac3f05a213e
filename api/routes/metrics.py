"""Prometheus metrics and a JSON status summary."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from api.deps import BackendDep

router = APIRouter(tags=["operations"])


@router.get("/metrics", response_class=Response)
async def metrics(backend: BackendDep) -> Response:
    body, content_type = backend.metrics_text()
    return Response(content=body, media_type=content_type)


@router.get("/status")
async def status(backend: BackendDep) -> dict[str, Any]:
    """Counters and watermarks in one JSON document (what ``make run`` prints)."""
    return backend.status()
