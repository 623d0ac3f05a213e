"""The enrichment logic with an in-process lookup: fallback, retries, timeout,
order, dead letters and the watermark it reports (the HTTP service and Kafka are
in tests/integration/test_sensor_rooms.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from eddy.eventtime import BoundedOutOfOrderness
from eddy.examples.records import SensorReading
from eddy.pipeline.base import Target
from eddy.pipeline.enrich import AsyncEnrichment, EnrichmentLogic, Lookup
from eddy.pipeline.source import Source
from eddy.serde import JsonModel, encode_json
from eddy.tables.store import PartitionStore
from tests.support.fakes import CollectingOutput, FakeRecord


@pytest.fixture
def store(tmp_path: Path) -> Iterator[PartitionStore]:
    store = PartitionStore(tmp_path / "p0")
    yield store
    store.close()


def logic_for(store: PartitionStore, lookup: Lookup, **options: Any) -> EnrichmentLogic:
    definition = AsyncEnrichment(
        name="rooms",
        source=Source(
            "readings",
            JsonModel(SensorReading),
            timestamp_ms=lambda r: r.timestamp_ms,
        ),
        lookup=lookup,
        enrich=lambda value, room: {**value.model_dump(), "room": room},
        fallback="UNKNOWN ROOM",
        outputs=(Target("rooms", encode_json),),
        watermark=BoundedOutOfOrderness(bound_ms=1_000),
        **options,
    )
    return definition.create_logic(0, store, store.begin())


def reading(n: int, sensor: str, timestamp_ms: int) -> FakeRecord:
    body = {"sensor_id": sensor, "timestamp_ms": timestamp_ms, "temperature": 70.0}
    return FakeRecord(n, orjson.dumps(body))


async def run(logic: EnrichmentLogic, records: list[FakeRecord]) -> CollectingOutput:
    out = CollectingOutput()
    for record in records:
        await logic.process_async(record, out)
    await logic.flush(out)
    return out


async def test_ordered_output_follows_the_input_whatever_the_lookup_latency(
    store: PartitionStore,
) -> None:
    async def slow_for_low_numbers(value: SensorReading) -> str:
        number = int(value.sensor_id.split("_")[1])
        await asyncio.sleep((10 - number) / 1000)
        return f"room_{number}"

    logic = logic_for(store, slow_for_low_numbers, capacity=10, ordered=True)
    out = await run(logic, [reading(n, f"sensor_{n}", 1_000 + n) for n in range(10)])
    assert [r["sensor_id"] for r in out.sent] == [f"sensor_{n}" for n in range(10)]
    assert {r["room"] for r in out.sent} == {f"room_{n}" for n in range(10)}


async def test_unordered_output_follows_completion(store: PartitionStore) -> None:
    answered = {f"sensor_{n}": asyncio.Event() for n in range(10)}

    async def when_told(value: SensorReading) -> str:
        await answered[value.sensor_id].wait()
        return "room"

    logic = logic_for(store, when_told, capacity=10, ordered=False)
    out = CollectingOutput()
    for n in range(10):
        await logic.process_async(reading(n, f"sensor_{n}", 1_000 + n), out)
    for n in reversed(range(10)):  # the service answers the last reading first
        answered[f"sensor_{n}"].set()
        await asyncio.sleep(0.01)
        logic.on_tick(0, out)
    await logic.flush(out)
    assert [r["sensor_id"] for r in out.sent] == [f"sensor_{n}" for n in reversed(range(10))]


async def test_unordered_output_never_crosses_a_watermark(store: PartitionStore) -> None:
    answered = {f"sensor_{n}": asyncio.Event() for n in range(4)}

    async def when_told(value: SensorReading) -> str:
        await answered[value.sensor_id].wait()
        return "room"

    logic = logic_for(store, when_told, capacity=10, ordered=False)
    out = CollectingOutput()
    for n in range(2):
        await logic.process_async(reading(n, f"sensor_{n}", 5_000 + n), out)
    logic.on_tick(1_000, out)  # the watermark (4 000) enters the queue here
    for n in range(2, 4):
        await logic.process_async(reading(n, f"sensor_{n}", 9_000 + n), out)
    for n in (3, 2, 1):
        answered[f"sensor_{n}"].set()
        await asyncio.sleep(0.01)
    logic.on_tick(1_001, out)  # too soon for another watermark
    assert [r["sensor_id"] for r in out.sent] == ["sensor_1"]  # 2 and 3 wait behind it
    assert logic.watermark_ms < 0
    answered["sensor_0"].set()
    await logic.flush(out)
    assert [r["sensor_id"] for r in out.sent] == ["sensor_1", "sensor_0", "sensor_3", "sensor_2"]
    assert logic.watermark_ms == 9_003 - 1_000 - 1


async def test_a_miss_a_timeout_and_a_failing_service_give_the_fallback(
    store: PartitionStore,
) -> None:
    async def lookup(value: SensorReading) -> str | None:
        sensor = value.sensor_id
        if sensor == "hangs":
            await asyncio.sleep(10)
        if sensor == "fails":
            raise ConnectionError("refused")
        return None if sensor == "unknown" else "room_1"

    logic = logic_for(store, lookup, timeout_ms=200, retries=2)
    sensors = ["known", "unknown", "hangs", "fails"]
    out = await run(logic, [reading(n, s, 1_000) for n, s in enumerate(sensors)])
    rooms = {r["sensor_id"]: r["room"] for r in out.sent}
    assert rooms == {
        "known": "room_1",
        "unknown": "UNKNOWN ROOM",
        "hangs": "UNKNOWN ROOM",
        "fails": "UNKNOWN ROOM",
    }
    assert out.events["lookup.miss"] == 1
    assert out.events["lookup.timeout"] == 1
    assert out.events["lookup.error"] == 1
    assert out.events["lookup.retry"] == 2  # "fails" was tried three times
    assert out.events["observed.lookup"] == 4


async def test_a_transient_failure_is_retried_and_answered(store: PartitionStore) -> None:
    attempts: list[int] = []

    async def flaky(value: SensorReading) -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("reset")
        return "room_7"

    out = await run(logic_for(store, flaky, retries=2), [reading(0, "sensor_7", 1_000)])
    assert out.sent[0]["room"] == "room_7"
    assert len(attempts) == 3


async def test_a_malformed_record_is_dead_lettered_and_never_looked_up(
    store: PartitionStore,
) -> None:
    looked_up: list[str] = []

    async def lookup(value: SensorReading) -> str:
        looked_up.append(value.sensor_id)
        return "room"

    records = [FakeRecord(0, b"{not json"), reading(1, "sensor_1", 1_000)]
    out = await run(logic_for(store, lookup), records)
    assert len(out.dead) == 1
    assert looked_up == ["sensor_1"]
    assert len(out.sent) == 1


async def test_the_watermark_waits_for_pending_lookups(store: PartitionStore) -> None:
    release = asyncio.Event()

    async def blocked(value: SensorReading) -> str:
        await release.wait()
        return "room"

    logic = logic_for(store, blocked, capacity=10)
    out = CollectingOutput()
    await logic.process_async(reading(0, "sensor_1", 5_000), out)
    await logic.process_async(reading(1, "sensor_1", 9_000), out)
    assert logic.watermark_ms < 0  # the tracker is at 7 999, but two lookups are pending
    release.set()
    await logic.flush(out)
    assert logic.watermark_ms == 9_000 - 1_000 - 1
    assert len(out.sent) == 2
