"""Exactly-once enrichment across a crash: a worker killed with lookups in flight;
its successor looks those readings up again, and every reading is in the committed
output once, with its room."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import orjson
import pytest

from agents.sensor_rooms import UNKNOWN_ROOM
from service.settings import Settings
from service.simulator.rooms import room_of
from tests.support.kafka import create_topics, produce, read_all, unique_settings, wait_until
from tests.support.processes import WorkerProcess
from tests.support.rooms import RoomService

pytestmark = pytest.mark.e2e

READINGS = 6_000


def rows() -> list[tuple[bytes, bytes]]:
    out = []
    for i in range(READINGS):
        sensor = f"sensor_{i % 40 + 1}"
        body = {"sensor_id": sensor, "timestamp_ms": 1_000_000 + i, "temperature": 20.0}
        out.append((sensor.encode(), orjson.dumps(body)))
    return out


async def test_lookups_in_flight_at_a_crash_are_redone_and_output_once(tmp_path: Path) -> None:
    service = RoomService(tmp_path / "rooms.log", latency_ms=20, jitter_ms=20)
    settings = unique_settings(
        tmp_path,
        pipelines=("sensor_rooms",),
        room_service_url=service.url,
        lookup_capacity=50,
        commit_interval_ms=300,
    )
    await create_topics(settings)
    data = rows()
    first = WorkerProcess(settings, tmp_path / "first.log")
    try:
        first.wait_ready()
        feed = asyncio.create_task(_feed(settings, data))

        def halfway() -> bool:
            status = first.status()["pipelines"]["sensor_rooms"]
            return bool(status["records_in"] >= READINGS // 4 and status["commits"] >= 2)

        await wait_until(halfway, timeout_s=120)
        first.stop(signal.SIGKILL)  # lookups in flight, a transaction open
        await feed
        second = WorkerProcess(settings, tmp_path / "second.log")
        try:
            second.wait_ready()
            out = await read_all(
                settings, settings.topic("sensor-rooms"), min_records=READINGS, timeout_s=180
            )
        finally:
            second.stop()
        requests = service.stats()["requests"]
    finally:
        service.stop()

    seen = [orjson.loads(r.value) for r in out]
    ids = [(r["sensor_id"], r["timestamp_ms"]) for r in seen]
    assert len(ids) == len(set(ids)) == READINGS  # none lost, none twice
    for record in seen:
        assert record["room"] == (room_of(record["sensor_id"]) or UNKNOWN_ROOM)
    # Some readings were looked up twice: before the crash and again after it.
    assert requests > READINGS


async def _feed(settings: Settings, data: list[tuple[bytes, bytes]]) -> None:
    for start in range(0, len(data), 500):
        await produce(settings, settings.readings_topic, data[start : start + 500])
        await asyncio.sleep(0.2)
