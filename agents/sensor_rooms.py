"""The seeds' async I/O example (E18): each reading enriched with its sensor's
room, looked up in an HTTP service (``python -m service rooms``; make run starts
one). A sensor the service does not know, or a lookup that keeps failing or is not
answered within the timeout, gets ``UNKNOWN ROOM``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from http import HTTPStatus
from typing import Any

import aiohttp

from service.eventtime import BoundedOutOfOrderness
from service.pipeline.enrich import AsyncEnrichment
from service.pipeline.keyed import Input
from service.records import SensorReading
from service.settings import Settings

NAME = "sensor_rooms"
UNKNOWN_ROOM = "UNKNOWN ROOM"


# The runtime has no close hook for a pipeline, so each session is owned by an async
# generator, kept here: asyncio closes every open async generator when its loop shuts
# down (asyncio.run, asyncio.Runner), and the session then closes inside that loop.
# Left to the garbage collector, every worker exit logged an asyncio ERROR
# ("Unclosed client session", with the list of connections).
_OWNERS: dict[aiohttp.ClientSession, AsyncGenerator[aiohttp.ClientSession, None]] = {}


class RoomClient:
    """``GET <url>/rooms/<sensor_id>`` over one pooled HTTP session per worker.

    aiohttp rather than httpx: measured against the room service, httpx spent
    2.4-8.6 ms of CPU per request (growing with the requests in flight), aiohttp
    0.3 ms (docs/performance.md, External I/O).
    The session is created on first use, inside the worker's event loop, and
    closed when that loop shuts down.
    """

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        self._session: aiohttp.ClientSession | None = None

    async def room_of(self, reading: dict[str, Any]) -> str | None:
        session = self._session
        if session is None or session.closed:
            session = await self._open()
        async with session.get(f"/rooms/{reading['sensor_id']}") as response:
            if response.status == HTTPStatus.NOT_FOUND:
                return None
            response.raise_for_status()  # 5xx: retried by the enrichment
            body = await response.json()
        room: str = body["room"]
        return room

    async def _open(self) -> aiohttp.ClientSession:
        for closed in [session for session in _OWNERS if session.closed]:
            del _OWNERS[closed]
        owner = _owned_session(self._base_url)
        session = await anext(owner)  # never suspends: no second opener races it
        _OWNERS[session] = owner
        self._session = session
        return session


async def _owned_session(base_url: str) -> AsyncGenerator[aiohttp.ClientSession, None]:
    # No per-request timeout: the enrichment's own timeout covers the lookup with
    # its retries, and cancels the request when it expires.
    session = aiohttp.ClientSession(
        base_url,
        connector=aiohttp.TCPConnector(limit=0),
        timeout=aiohttp.ClientTimeout(total=None),
    )
    try:
        yield session
    finally:
        await session.close()


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
