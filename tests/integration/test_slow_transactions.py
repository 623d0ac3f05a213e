"""Transactions of slow (async) records against the real broker: the commit interval
holds within one fetch, and a partition whose transaction the broker aborts, while
the worker still owns it, is reopened and finished instead of being dropped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from eddy import examples
from eddy.kafka_clients import connection_kwargs
from eddy.settings import Settings
from eddy.worker import Worker
from tests.support.kafka import (
    create_topics,
    produce,
    read_all,
    readings_topic,
    unique_settings,
    wait_until,
)
from tests.support.rooms import RoomService, readings

pytestmark = pytest.mark.integration


@pytest.fixture
def slow_rooms(tmp_path: Path) -> Iterator[RoomService]:
    service = RoomService(tmp_path / "rooms.log", latency_ms=20)
    yield service
    service.stop()


def one_lookup_at_a_time(tmp_path: Path, service: RoomService) -> Settings:
    return unique_settings(
        tmp_path, agents=("sensor_rooms",), partitions=1, session_timeout_ms=6_000
    )


def worker_of(settings: Settings, service: RoomService) -> Worker:
    room = {"room_service_url": service.url, "lookup_capacity": 1}
    return Worker(settings, examples.app.build(settings, overrides={"RoomSettings": room}))


async def committed_end(settings: Settings, topic: str) -> int:
    """What a ``read_committed`` reader can read of partition 0 (its last stable offset)."""
    consumer = AIOKafkaConsumer(
        **connection_kwargs(settings), group_id=None, isolation_level="read_committed"
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        return int((await consumer.end_offsets([tp]))[tp])
    finally:
        await consumer.stop()


async def test_results_commit_every_interval_within_one_fetch(
    tmp_path: Path, slow_rooms: RoomService
) -> None:
    """All 400 readings are in the worker's first fetch; at 20+ ms a lookup, one at a
    time, they take 8 s or more. Readers must see results every commit interval
    (100 ms), not only once the fetch is done: a transaction spanning the whole fetch
    delays them, and with slower lookups outlives the broker's transaction timeout."""
    settings = one_lookup_at_a_time(tmp_path, slow_rooms)
    await create_topics(settings)
    await produce(settings, readings_topic(settings), readings(400))
    worker = worker_of(settings, slow_rooms)
    await worker.start()
    try:
        await wait_until(lambda: slow_rooms.stats()["requests"] >= 100, timeout_s=60)
        visible = await committed_end(settings, settings.topic("sensor-rooms"))
        assert slow_rooms.stats()["requests"] < 400  # still working through the fetch
        assert visible >= 50
        out = await read_all(settings, settings.topic("sensor-rooms"), min_records=400)
    finally:
        await worker.stop()
    assert len(out) == 400


async def test_a_fenced_partition_still_owned_here_is_reopened_and_finished(
    tmp_path: Path, slow_rooms: RoomService
) -> None:
    """What the broker does to a transaction that outlives its timeout: it aborts it
    and bumps the producer epoch, so the worker's next send or commit is fenced
    although no other worker took the partition. The worker must reopen it from
    its last commit (the group still assigns it here) and finish, exactly once."""
    settings = one_lookup_at_a_time(tmp_path, slow_rooms)
    await create_topics(settings)
    rows = readings(300)
    await produce(settings, readings_topic(settings), rows)
    worker = worker_of(settings, slow_rooms)
    await worker.start()
    try:
        await wait_until(lambda: slow_rooms.stats()["requests"] >= 50, timeout_s=60)
        fencer = AIOKafkaProducer(
            **connection_kwargs(settings),
            transactional_id=f"{settings.app_id}-sensor_rooms-0",
        )
        await fencer.start()  # InitProducerId: a new epoch, the open transaction aborted
        await fencer.stop()
        assert slow_rooms.stats()["requests"] < 300  # fenced mid-way
        out = await read_all(settings, settings.topic("sensor-rooms"), min_records=300)
        ready, _ = worker.readiness()
    finally:
        await worker.stop()
    sent = [orjson.loads(value)["timestamp_ms"] for _, value in rows]
    assert [orjson.loads(r.value)["timestamp_ms"] for r in out] == sent  # once each, in order
    assert ready
