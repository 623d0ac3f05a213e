"""Sensor window results from the ``sensor_averages`` pipeline's state."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from api.deps import BackendDep
from api.errors import BadRequestError
from api.schemas import Freshness, SensorWindows, WindowOut

router = APIRouter(prefix="/sensors", tags=["sensors"])
MAX_TIME_MS = 2**62
DEFAULT_LIMIT = 100


@router.get(
    "/{sensor_id}/windows",
    response_model=SensorWindows,
    responses={
        400: {"description": "Inconsistent range or limit above the maximum"},
        404: {"description": "No data for this sensor"},
        503: {"description": "The sensor's partition is recovering or owned elsewhere"},
    },
)
def sensor_windows(
    backend: BackendDep,
    sensor_id: Annotated[str, Path(min_length=1, max_length=200)],
    from_ms: Annotated[int, Query(ge=0, le=MAX_TIME_MS, description="Window start >= this")] = 0,
    to_ms: Annotated[
        int, Query(ge=0, le=MAX_TIME_MS, description="Window start < this")
    ] = MAX_TIME_MS,
    limit: Annotated[
        int | None, Query(ge=1, description="Most windows to return (default 100)")
    ] = None,
) -> SensorWindows:
    """Windows of one sensor whose start lies in ``[from_ms, to_ms)``, oldest first."""
    if from_ms > to_ms:
        raise BadRequestError(f"from_ms ({from_ms}) must not be after to_ms ({to_ms})")
    if limit is None:
        limit = min(DEFAULT_LIMIT, backend.max_results)
    if limit > backend.max_results:
        raise BadRequestError(f"limit {limit} is above the maximum of {backend.max_results}")
    page = backend.sensor_windows(sensor_id, from_ms, to_ms, limit)
    return SensorWindows(
        sensor_id=sensor_id,
        from_ms=from_ms,
        to_ms=to_ms,
        windows=[WindowOut.model_validate(w) for w in page.windows],
        next_from_ms=page.next_from_ms,
        freshness=Freshness(
            served_by=backend.worker_id,
            partition=page.partition,
            watermark_ms=page.watermark_ms,
            committed_offsets=page.committed_offsets,
        ),
    )
