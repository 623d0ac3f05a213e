"""The reference app's own REST routes, beyond the generated ones and aliases.

They read the agents' committed state with ``Queries``; a key another worker
owns is answered by that worker.
"""

from __future__ import annotations

import contextlib

from pydantic import BaseModel, Field

from eddy import QUERY_ERRORS, Queries, QueryError
from eddy.examples.app import app

ROLLING_MS = 60_000
MAX_WINDOWS = 1_000


class RollingStats(BaseModel):
    windows: int
    readings: int
    avg: float = Field(description="Weighted by each window's readings.")
    min: float
    max: float


class SensorSummary(BaseModel):
    key: str
    latest_temperature: float | None = Field(
        description="The last reading's temperature (sensor_alerts; null if it does not run)."
    )
    rolling_minute: RollingStats | None = Field(
        description="Over sensor_averages' windows that closed in the newest minute."
    )


@app.router.get(
    "/sensors/{key}", response_model=SensorSummary, responses=QUERY_ERRORS, tags=["sensors"]
)
async def sensor_summary(key: str, queries: Queries) -> SensorSummary:
    """A sensor's latest reading and its statistics over its newest minute of windows."""
    newest = queries.windows("sensor_averages", key, newest_first=True, limit=MAX_WINDOWS)
    windows = newest.windows
    if windows:
        since = windows[0]["window_end_ms"] - ROLLING_MS
        windows = [w for w in windows if w["window_start_ms"] >= since]
    latest = None
    with contextlib.suppress(QueryError):  # sensor_alerts may not run, or not know it yet
        latest = queries.state("sensor_alerts", "last_temp", key)
    return SensorSummary(key=key, latest_temperature=latest, rolling_minute=_rolling(windows))


def _rolling(windows: list[dict[str, float]]) -> RollingStats | None:
    if not windows:
        return None
    count = int(sum(w["count"] for w in windows))
    return RollingStats(
        windows=len(windows),
        readings=count,
        avg=sum(w["avg"] * w["count"] for w in windows) / count,
        min=min(w["min"] for w in windows),
        max=max(w["max"] for w in windows),
    )


class Agreement(BaseModel):
    key: str
    checks: int = Field(description="Checks in state (the results' retention).")
    agreement_rate: float = Field(description="Over those checks.")
    rolling_agreement: float = Field(description="Over the vehicle's last 100 checks.")


@app.router.get(
    "/vehicles/{key}/agreement",
    response_model=Agreement,
    responses=QUERY_ERRORS,
    tags=["vehicles"],
)
async def vehicle_agreement(key: str, queries: Queries) -> Agreement:
    """How often the vehicle's phone app agrees with its OBD device."""
    checks = queries.windows("vehicle_speed", key, newest_first=True, limit=10_000).windows
    agreeing = sum(1 for c in checks if c["within_tolerance"])
    return Agreement(
        key=key,
        checks=len(checks),
        agreement_rate=agreeing / len(checks) if checks else 0.0,
        rolling_agreement=checks[0]["rolling_agreement"] if checks else 0.0,
    )
