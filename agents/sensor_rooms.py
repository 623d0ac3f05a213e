"""The seeds' async I/O example (E18): each reading enriched with its sensor's
room, looked up in an HTTP service (``python -m service rooms``; make run starts
one). A sensor the service does not know, or a lookup that keeps failing or is not
answered within the timeout, gets ``UNKNOWN ROOM``.
"""

from __future__ import annotations

from typing import Any

import httpx

from service.eventtime import BoundedOutOfOrderness
from service.pipeline.enrich import AsyncEnrichment
from service.pipeline.keyed import Input
from service.records import SensorReading
from service.settings import Settings

NAME = "sensor_rooms"
UNKNOWN_ROOM = "UNKNOWN ROOM"


class RoomClient:
    """``GET <url>/rooms/<sensor_id>`` over one pooled HTTP client per worker.

    The client is created on first use, inside the worker's event loop (an
    httpx client belongs to the loop it was first used in).
    """

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        self._client: httpx.AsyncClient | None = None

    async def room_of(self, reading: dict[str, Any]) -> str | None:
        if self._client is None:
            # No per-request timeout here: the enrichment's own timeout covers the
            # lookup with its retries, and cancels the request when it expires.
            self._client = httpx.AsyncClient(
                base_url=self._base_url,
                timeout=None,
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=200),
            )
        response = await self._client.get(f"/rooms/{reading['sensor_id']}")
        if response.status_code == httpx.codes.NOT_FOUND:
            return None
        response.raise_for_status()  # 5xx: retried by the enrichment
        room: str = response.json()["room"]
        return room


def with_room(reading: dict[str, Any], room: Any) -> dict[str, Any]:
    return {**reading, "room": room}


def build(settings: Settings) -> AsyncEnrichment:
    return AsyncEnrichment(
        name=NAME,
        source=Input(
            settings.readings_topic,
            SensorReading,
            key=lambda r: r.sensor_id,
            timestamp_ms=lambda r: r.timestamp_ms,
        ),
        lookup=RoomClient(settings.room_service_url).room_of,
        enrich=with_room,
        fallback=UNKNOWN_ROOM,
        sink=settings.topic("sensor-rooms"),
        watermark=BoundedOutOfOrderness(bound_ms=settings.watermark_bound_ms),
        capacity=settings.lookup_capacity,
        timeout_ms=settings.lookup_timeout_ms,
        retries=settings.lookup_retries,
        ordered=settings.lookup_ordered,
    )
