"""sensor_rooms against the real room lookup service and the real broker: order,
timeout fallback, and the capacity the service sees."""

from __future__ import annotations

import gc
import logging
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from eddy import examples
from eddy.examples.sensor_rooms import UNKNOWN_ROOM
from eddy.settings import Settings
from eddy.worker import Worker
from tests.support.kafka import create_topics, produce, read_all, readings_topic, unique_settings
from tests.support.rooms import RoomService, readings
from tools.simulator.rooms import room_of

pytestmark = pytest.mark.integration


def identity(value: bytes) -> tuple[str, int]:
    body = orjson.loads(value)
    return body["sensor_id"], body["timestamp_ms"]


async def enrich(settings: Settings, rows: list[tuple[bytes, bytes]], **room: Any) -> list[Any]:
    """Run one worker over ``rows`` with sensor_rooms' settings ``room``; the
    enriched records, read_committed."""
    await create_topics(settings)
    worker = Worker(settings, examples.app.build(settings, overrides={"RoomSettings": room}))
    await worker.start()
    try:
        await produce(settings, readings_topic(settings), rows)
        return await read_all(
            settings, settings.topic("sensor-rooms"), min_records=len(rows), timeout_s=120
        )
    finally:
        await worker.stop()


@pytest.fixture
def jittery(tmp_path: Path) -> Iterator[RoomService]:
    service = RoomService(tmp_path / "rooms.log", latency_ms=2, jitter_ms=30)
    yield service
    service.stop()


def per_partition(records: list[Any]) -> dict[int, list[tuple[str, int]]]:
    found: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for record in records:
        found[record.partition].append(identity(record.value))
    return found


async def input_order(settings: Settings) -> dict[int, list[tuple[str, int]]]:
    return per_partition(await read_all(settings, readings_topic(settings)))


@pytest.mark.parametrize("ordered", [True, False])
async def test_each_reading_gets_its_room_in_order_or_as_lookups_finish(
    tmp_path: Path, jittery: RoomService, ordered: bool
) -> None:
    settings = unique_settings(tmp_path, agents=("sensor_rooms",))
    rows = readings(900)
    room = {"room_service_url": jittery.url, "lookup_capacity": 20, "lookup_ordered": ordered}
    out = await enrich(settings, rows, **room)

    rooms = {identity(r.value): orjson.loads(r.value)["room"] for r in out}
    assert len(out) == len(rooms) == len(rows)  # each reading once
    for (sensor, _), room in rooms.items():
        assert room == (room_of(sensor) or UNKNOWN_ROOM)
    assert set(rooms.values()) >= {UNKNOWN_ROOM, "room_0", "room_7"}
    # Keyed by sensor, an enriched reading lands in its reading's partition number.
    got, sent = per_partition(out), await input_order(settings)
    assert {p: sorted(v) for p, v in got.items()} == {p: sorted(v) for p, v in sent.items()}
    if ordered:
        assert got == sent
    else:  # 0-30 ms of jitter per lookup, 20 in flight: finishing order differs
        assert got != sent


async def test_a_lookup_slower_than_the_timeout_gives_unknown_room(tmp_path: Path) -> None:
    service = RoomService(tmp_path / "rooms.log", latency_ms=3_000)
    try:
        settings = unique_settings(tmp_path, agents=("sensor_rooms",))
        room = {"room_service_url": service.url, "lookup_timeout_ms": 300, "lookup_capacity": 50}
        out = await enrich(settings, readings(60), **room)
    finally:
        service.stop()
    assert [orjson.loads(r.value)["room"] for r in out] == [UNKNOWN_ROOM] * 60


async def test_never_more_lookups_in_flight_than_the_capacity(tmp_path: Path) -> None:
    service = RoomService(tmp_path / "rooms.log", latency_ms=40)
    try:
        settings = unique_settings(tmp_path, agents=("sensor_rooms",), partitions=1)
        out = await enrich(settings, readings(300), room_service_url=service.url, lookup_capacity=5)
        stats = service.stats()
    finally:
        service.stop()
    assert len(out) == 300
    assert stats["requests"] == 300
    assert stats["in_flight_max"] == 5  # the capacity is used, and never exceeded


async def test_a_stopped_worker_leaves_no_lookup_session_open(
    tmp_path: Path, jittery: RoomService, caplog: pytest.LogCaptureFixture
) -> None:
    """The runtime closes the pipeline's HTTP session when it stops; left to the
    garbage collector, asyncio logs "Unclosed client session" (an ERROR) at every
    worker exit."""
    settings = unique_settings(tmp_path, agents=("sensor_rooms",), partitions=1)
    gc.collect()  # other tests' garbage is not this test's concern
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        out = await enrich(settings, readings(60), room_service_url=jittery.url)
        gc.collect()
    assert len(out) == 60
    assert not [r.getMessage() for r in caplog.records if "Unclosed" in r.getMessage()]
