"""The sensor-to-room lookup service that ``sensor_rooms`` enriches readings from.

``GET /rooms/<sensor_id>`` answers ``{"sensor_id", "room"}`` after ``latency_ms``
(plus up to ``jitter_ms``, seeded), or 404 for a sensor it does not know, or 503
for a ``failure_rate`` share of requests: the knobs the enrichment's timeout,
retries and ordering are tested against. ``GET /stats`` counts requests and the
most that were in flight at once (what the enrichment's capacity bounds).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

ROOMS = 8
UNKNOWN_EVERY = 13  # sensor_13, sensor_26... have no room ("UNKNOWN ROOM" in sensor_rooms)


def room_of(sensor_id: str) -> str | None:
    """``sensor_<n>`` is in ``room_<n % 8>``, unless n is a multiple of 13."""
    _, _, number = sensor_id.rpartition("_")
    if not number.isdigit() or int(number) % UNKNOWN_EVERY == 0:
        return None
    return f"room_{int(number) % ROOMS}"


@dataclass
class Knobs:
    latency_ms: int = 10
    jitter_ms: int = 0
    failure_rate: float = 0.0
    seed: int = 0


@dataclass
class Stats:
    requests: int = 0
    failures: int = 0
    in_flight: int = 0
    in_flight_max: int = 0
    by_sensor: dict[str, int] = field(default_factory=dict)


def create_app(knobs: Knobs) -> Starlette:
    stats = Stats()
    rng = random.Random(knobs.seed)

    async def lookup(request: Request) -> JSONResponse:
        sensor_id = request.path_params["sensor_id"]
        stats.requests += 1
        stats.by_sensor[sensor_id] = stats.by_sensor.get(sensor_id, 0) + 1
        stats.in_flight += 1
        stats.in_flight_max = max(stats.in_flight_max, stats.in_flight)
        try:
            delay_ms = knobs.latency_ms + (
                rng.randint(0, knobs.jitter_ms) if knobs.jitter_ms else 0
            )
            await asyncio.sleep(delay_ms / 1000)
            if knobs.failure_rate and rng.random() < knobs.failure_rate:
                stats.failures += 1
                return JSONResponse({"error": "injected failure"}, status_code=503)
            room = room_of(sensor_id)
            if room is None:
                return JSONResponse({"error": f"no room known for {sensor_id}"}, status_code=404)
            return JSONResponse({"sensor_id": sensor_id, "room": room})
        finally:
            stats.in_flight -= 1

    async def get_stats(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "requests": stats.requests,
                "failures": stats.failures,
                "in_flight": stats.in_flight,
                "in_flight_max": stats.in_flight_max,
                "distinct_sensors": len(stats.by_sensor),
            }
        )

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/rooms/{sensor_id}", lookup),
            Route("/stats", get_stats),
            Route("/healthz", health),
        ]
    )


def serve(host: str, port: int, knobs: Knobs) -> None:
    uvicorn.run(create_app(knobs), host=host, port=port, log_level="warning", access_log=False)
