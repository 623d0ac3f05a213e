"""Async I/O (docs/semantics.md, "Async enrichment"): each reading enriched with
its sensor's room, looked up in an HTTP service (``python -m tools rooms``; make run starts
one). A sensor the service does not know, or a lookup that keeps failing or is not
answered within the timeout, gets ``UNKNOWN ROOM``.
"""

from __future__ import annotations

from http import HTTPStatus

import aiohttp
from pydantic import BaseModel

from eddy import BoundedOutOfOrderness
from eddy.examples.app import app
from eddy.examples.records import SensorReading
from eddy.examples.settings import RoomSettings
from eddy.examples.topics import ROOMS, readings

UNKNOWN_ROOM = "UNKNOWN ROOM"


class ReadingInRoom(BaseModel):
    sensor_id: str
    timestamp_ms: int
    temperature: float
    room: str


class RoomClient:
    """``GET <url>/rooms/<sensor_id>`` over one pooled HTTP session per worker.

    aiohttp rather than httpx: measured against the room service, httpx spent
    2.4-8.6 ms of CPU per request (growing with the requests in flight), aiohttp
    0.3 ms (docs/performance.md, External I/O).
    The session is created on first use, inside the worker's event loop, and
    closed by the runtime when the worker stops (the pipeline's close hook).
    """

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        self._session: aiohttp.ClientSession | None = None

    async def room_of(self, reading: SensorReading) -> str | None:
        session = self._session
        if session is None or session.closed:
            # No per-request timeout: the enrichment's own timeout covers the lookup
            # with its retries, and cancels the request when it expires.
            session = self._session = aiohttp.ClientSession(
                self._base_url,
                connector=aiohttp.TCPConnector(limit=0),
                timeout=aiohttp.ClientTimeout(total=None),
            )
        async with session.get(f"/rooms/{reading.sensor_id}") as response:
            if response.status == HTTPStatus.NOT_FOUND:
                return None
            response.raise_for_status()  # 5xx: retried by the enrichment
            body = await response.json()
        room: str = body["room"]
        return room

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


def with_room(reading: SensorReading, room: str) -> ReadingInRoom:
    return ReadingInRoom(**reading.model_dump(), room=room)


@app.define(settings=RoomSettings, default=False)
def sensor_rooms(s: RoomSettings) -> None:
    rooms = RoomClient(s.room_service_url)
    (
        app.stream(readings(s), watermark=BoundedOutOfOrderness(bound_ms=s.watermark_bound_ms))
        .enrich(
            rooms.room_of,
            into=with_room,
            fallback=UNKNOWN_ROOM,
            capacity=s.lookup_capacity,
            timeout_ms=s.lookup_timeout_ms,
            retries=s.lookup_retries,
            ordered=s.lookup_ordered,
            on_close=rooms.close,
        )
        .to(ROOMS)
    )
