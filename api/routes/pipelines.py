"""REST resources of the reference pipelines (README, "Reference pipelines")."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field

from api.deps import BackendDep
from api.errors import BadRequestError
from api.forward import ask_owners
from api.schemas import Freshness

router = APIRouter(tags=["pipelines"])
Key = Annotated[str, Path(min_length=1, max_length=200)]
MAX_TIME_MS = 2**62


class WindowsOf(BaseModel):
    key: str
    windows: list[dict[str, Any]]
    next_from_ms: int | None
    freshness: Freshness


class KeyState(BaseModel):
    key: str
    state: Any
    partition: int
    served_by: str


class Agreement(BaseModel):
    vehicle_id: str
    checks: int
    agreements: int
    agreement_rate: float = Field(description="Over all checks of this vehicle.")
    rolling_agreement: float = Field(description="Over its last 100 checks.")
    served_by: str


class TopRow(BaseModel):
    hashtag: str
    count: int
    total: int


class Top(BaseModel):
    window_start_ms: int
    window_end_ms: int
    top: list[TopRow]
    partitions: list[int] = Field(description="Partitions this answer covers.")
    served_by: str


def page_limit(backend: BackendDep, from_ms: int, to_ms: int, limit: int | None) -> int:
    """The page size to use, after checking the range and the limit (400 if wrong)."""
    if from_ms > to_ms:
        raise BadRequestError(f"from_ms ({from_ms}) must not be after to_ms ({to_ms})")
    limit = min(100, backend.max_results) if limit is None else limit
    if limit > backend.max_results:
        raise BadRequestError(f"limit {limit} is above the maximum of {backend.max_results}")
    return limit


def _windows(
    backend: BackendDep, pipeline: str, key: str, from_ms: int, to_ms: int, limit: int | None
) -> WindowsOf:
    limit = page_limit(backend, from_ms, to_ms, limit)
    page = backend.windows(pipeline, key, from_ms, to_ms, limit)
    return WindowsOf(
        key=key,
        windows=page.windows,
        next_from_ms=page.next_from_ms,
        freshness=Freshness.of(backend.worker_id, page),
    )


FromMs = Annotated[int, Query(ge=0, le=MAX_TIME_MS, description="Window start >= this")]
ToMs = Annotated[int, Query(ge=0, le=MAX_TIME_MS, description="Window start < this")]
Limit = Annotated[int | None, Query(ge=1, description="Most windows (default 100)")]


@router.get("/sensors/{sensor_id}/minmax", response_model=WindowsOf)
async def sensor_minmax(
    backend: BackendDep,
    sensor_id: Key,
    from_ms: FromMs = 0,
    to_ms: ToMs = MAX_TIME_MS,
    limit: Limit = None,
) -> WindowsOf:
    """``MinMaxTemp`` per 5 s window (sensor_minmax)."""
    return _windows(backend, "sensor_minmax", sensor_id, from_ms, to_ms, limit)


@router.get("/sensors/{sensor_id}/counts", response_model=WindowsOf)
async def sensor_counts(
    backend: BackendDep,
    sensor_id: Key,
    from_ms: FromMs = 0,
    to_ms: ToMs = MAX_TIME_MS,
    limit: Limit = None,
) -> WindowsOf:
    """Readings per 10 s window, with first/update (sensor_counts)."""
    return _windows(backend, "sensor_counts", sensor_id, from_ms, to_ms, limit)


@router.get("/sensors/{sensor_id}/alerts", response_model=KeyState)
async def sensor_alerts(backend: BackendDep, sensor_id: Key) -> KeyState:
    """The sensor's latest alerts, newest last (sensor_alerts)."""
    found = backend.state_value("sensor_alerts", "recent", sensor_id)
    return KeyState(
        key=sensor_id, state=found.value, partition=found.partition, served_by=backend.worker_id
    )


@router.get("/vehicles/{vehicle_id}/checks", response_model=WindowsOf)
async def vehicle_checks(
    backend: BackendDep,
    vehicle_id: Key,
    from_ms: FromMs = 0,
    to_ms: ToMs = MAX_TIME_MS,
    limit: Limit = None,
) -> WindowsOf:
    """Per-second speed checks of one vehicle (vehicle_speed)."""
    return _windows(backend, "vehicle_speed", vehicle_id, from_ms, to_ms, limit)


@router.get("/vehicles/{vehicle_id}/agreement", response_model=Agreement)
async def vehicle_agreement(backend: BackendDep, vehicle_id: Key) -> Agreement:
    """How often the vehicle's app agrees with its OBD device (vehicle_speed)."""
    state = backend.window_key_state("vehicle_speed", vehicle_id).value
    recent = state.get("recent") or []
    checks = int(state.get("checks", 0))
    agreements = int(state.get("agreements", 0))
    return Agreement(
        vehicle_id=vehicle_id,
        checks=checks,
        agreements=agreements,
        agreement_rate=agreements / checks if checks else 0.0,
        rolling_agreement=sum(recent) / len(recent) if recent else 0.0,
        served_by=backend.worker_id,
    )


@router.get("/hashtags/top", response_model=Top)
async def hashtags_top(
    request: Request,
    backend: BackendDep,
    window_start_ms: Annotated[
        int | None,
        Query(ge=0, le=MAX_TIME_MS, description="A window's start (default: newest closed)"),
    ] = None,
    n: Annotated[int, Query(ge=1, le=1_000, description="How many hashtags")] = 10,
    scope: Annotated[
        Literal["all", "local"],
        Query(description="all: every partition, asking the other workers; local: this one's"),
    ] = "all",
) -> Top:
    """The window's most used hashtags (hashtag_counts), over every partition."""
    if window_start_ms is not None and window_start_ms % 60_000:
        raise BadRequestError("window_start_ms must be a minute boundary (windows are 1 min)")
    top = backend.window_top("hashtag_counts", window_start_ms, 60_000, n, "count")
    rows = [TopRow(hashtag=r["hashtag"], count=r["count"], total=r["total"]) for r in top.rows]
    partitions = set(top.partitions)
    if scope == "all":
        params = {"window_start_ms": top.window.start_ms, "n": n, "scope": "local"}
        owners = backend.remote_owners("hashtag_counts")
        for answer in await ask_owners(request, owners, "/hashtags/top", params):
            rows += [TopRow.model_validate(row) for row in answer["top"]]
            partitions.update(answer["partitions"])
    rows.sort(key=lambda r: (-r.count, r.hashtag))
    return Top(
        window_start_ms=top.window.start_ms,
        window_end_ms=top.window.end_ms,
        top=rows[:n],
        partitions=sorted(partitions),
        served_by=backend.worker_id,
    )


@router.get("/hashtags/{hashtag}/counts", response_model=WindowsOf)
async def hashtag_counts(
    backend: BackendDep,
    hashtag: Key,
    from_ms: FromMs = 0,
    to_ms: ToMs = MAX_TIME_MS,
    limit: Limit = None,
) -> WindowsOf:
    """Per-minute counts and running total of one hashtag (lower case, no ``#``)."""
    return _windows(backend, "hashtag_counts", hashtag.lower(), from_ms, to_ms, limit)


@router.get("/teams/{team}/powerups", response_model=WindowsOf)
async def team_powerups(
    backend: BackendDep,
    team: Key,
    from_ms: FromMs = 0,
    to_ms: ToMs = MAX_TIME_MS,
    limit: Limit = None,
) -> WindowsOf:
    """Power-ups a team earned (team_powerups)."""
    return _windows(backend, "team_powerups", team, from_ms, to_ms, limit)
