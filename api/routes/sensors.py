"""Sensor window results from the ``sensor_averages`` pipeline's state."""

from __future__ import annotations

import contextlib
from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field

from api.deps import BackendDep
from api.routes.pipelines import page_limit
from api.schemas import Freshness, SensorWindows, WindowOut
from service.queries import UnknownKeyError

router = APIRouter(prefix="/sensors", tags=["sensors"])
MAX_TIME_MS = 2**62
ROLLING_MS = 60_000


class RollingStats(BaseModel):
    windows: int
    readings: int
    avg: float = Field(description="Weighted by each window's readings.")
    min: float
    max: float


@router.get(
    "/{sensor_id}/windows",
    response_model=SensorWindows,
    responses={
        400: {"description": "Inconsistent range or limit above the maximum"},
        404: {"description": "No data for this sensor"},
        503: {"description": "The sensor's partition is recovering or owned elsewhere"},
    },
)
async def sensor_windows(
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
    limit = page_limit(backend, from_ms, to_ms, limit)
    page = backend.sensor_windows(sensor_id, from_ms, to_ms, limit)
    return SensorWindows(
        sensor_id=sensor_id,
        from_ms=from_ms,
        to_ms=to_ms,
        windows=[WindowOut.model_validate(w) for w in page.windows],
        next_from_ms=page.next_from_ms,
        freshness=Freshness.of(backend.worker_id, page),
    )


class SensorSummary(BaseModel):
    sensor_id: str
    latest_temperature: float | None = Field(
        description="The last reading's temperature (sensor_alerts' state; None if not running)."
    )
    last_window: WindowOut | None = Field(description="The newest closed 5 s window.")
    rolling_minute: RollingStats | None = Field(
        description="Over the windows that closed in the last minute of event time."
    )
    freshness: Freshness


@router.get(
    "/{sensor_id}",
    response_model=SensorSummary,
    responses={
        404: {"description": "No data for this sensor"},
        503: {"description": "The sensor's partition is recovering or moving"},
    },
)
async def sensor_summary(
    backend: BackendDep, sensor_id: Annotated[str, Path(min_length=1, max_length=200)]
) -> SensorSummary:
    """The sensor's latest reading and its rolling statistics over the last minute."""
    newest = backend.sensor_windows(sensor_id, 0, MAX_TIME_MS, 1)
    # The watermark bounds what has closed; a minute of windows ends there.
    recent_from_ms = max(0, (newest.watermark_ms or 0) - ROLLING_MS)
    page = backend.sensor_windows(sensor_id, recent_from_ms, MAX_TIME_MS, backend.max_results)
    windows = [WindowOut.model_validate(w) for w in page.windows]
    latest: float | None = None
    if "sensor_alerts" in backend.pipelines():
        with contextlib.suppress(UnknownKeyError):
            latest = float(backend.state_value("sensor_alerts", "last_temp", sensor_id).value)
    return SensorSummary(
        sensor_id=sensor_id,
        latest_temperature=latest,
        last_window=windows[-1] if windows else None,
        rolling_minute=_rolling(windows),
        freshness=Freshness.of(backend.worker_id, page),
    )


def _rolling(windows: list[WindowOut]) -> RollingStats | None:
    if not windows:
        return None
    count = sum(w.count for w in windows)
    return RollingStats(
        windows=len(windows),
        readings=count,
        avg=sum(w.avg * w.count for w in windows) / count,
        min=min(w.min for w in windows),
        max=max(w.max for w in windows),
    )
