"""Producing fixtures to and reading results from the real broker."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord

from eddy.kafka_clients import connection_kwargs
from eddy.settings import Settings, build
from eddy.topics import admin_client, app_topics, ensure_topics, partition_counts

# Event time for test records: an hour ago, on the hour. Outputs carry event time as
# their Kafka timestamp, and the broker deletes segments older than its retention
# (7 days) every 5 minutes: records from 1970 can vanish in the middle of a test.
HOUR_AGO_MS = (time.time_ns() // 3_600_000_000_000 - 1) * 3_600_000


def unique_settings(tmp_path: Any, **overrides: Any) -> Settings:
    """Settings with topics, group and state of their own, so tests never collide."""
    tag = uuid.uuid4().hex[:8]
    values: dict[str, Any] = {
        "app_id": f"test-{tag}",
        "dead_letter_topic": f"dead-{tag}",
        "topic_prefix": f"t-{tag}-",
        "agents": ("sensor_averages",),
        "state_dir": tmp_path / "state",
        "savepoint_root": str(tmp_path / "savepoints"),
        "api_port": 0,
        "worker_id": f"worker-{tag}",
        "commit_interval_ms": 100,
        # `eddy worker` processes: one ingest process (and the query process) unless
        # a test asks for more; in-process workers ignore it.
        "worker_processes": 1,
    }
    values.update(overrides)
    return build(Settings, values)


async def produce(
    settings: Settings, topic: str, records: Iterable[tuple[bytes | None, bytes | None]]
) -> int:
    producer = AIOKafkaProducer(**connection_kwargs(settings), enable_idempotence=True, linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic, value, key=key) for key, value in records]
        await asyncio.gather(*futures)
        return len(futures)
    finally:
        await producer.stop()


async def read_all(
    settings: Settings,
    topic: str,
    *,
    committed: bool = True,
    min_records: int = 0,
    timeout_s: float = 60.0,
    quiet_s: float = 2.0,
) -> list[ConsumerRecord[bytes, bytes]]:
    """Read a topic from the beginning until ``min_records`` arrived and it went quiet."""
    consumer = AIOKafkaConsumer(
        **connection_kwargs(settings),
        group_id=None,
        isolation_level="read_committed" if committed else "read_uncommitted",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    records: list[ConsumerRecord[bytes, bytes]] = []
    try:
        count = await topic_partitions(settings, topic)
        consumer.assign([TopicPartition(topic, p) for p in range(count)])
        await consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout_s
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=200)
            for part in batch.values():
                records.extend(part)
            if batch:
                last_new = time.monotonic()
            elif len(records) >= min_records and time.monotonic() - last_new >= quiet_s:
                break
        return records
    finally:
        await consumer.stop()


async def create_topics(settings: Settings) -> None:
    """The topics of the reference agents ``settings.agents`` names."""
    from eddy.examples import app

    await ensure_topics(settings, app_topics(app.build(settings, overrides=TEST_AGENT_SETTINGS)))


# What the reference app's agent settings need in tests (no PostgreSQL unless asked).
TEST_AGENT_SETTINGS = {"SinkSettings": {"postgres_dsn": "postgresql://unused@127.0.0.1:1/x"}}


def sensor_settings() -> Any:
    """The sensor agents' settings as a test runs them (the defaults, unless the
    environment says otherwise)."""
    from eddy.examples.settings import SensorSettings

    return build(SensorSettings, {})


def readings_topic(settings: Settings) -> str:
    """The reference readings topic of these settings (``EDDY_TOPIC_PREFIX`` in front)."""
    return settings.topic("sensor-readings")


async def end_offsets(settings: Settings, topic: str) -> dict[int, int]:
    """Each partition's end offset (the next offset to be written)."""
    count = await topic_partitions(settings, topic)
    consumer = AIOKafkaConsumer(**connection_kwargs(settings), group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(count)]
        return {tp.partition: offset for tp, offset in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


async def topic_partitions(settings: Settings, topic: str) -> int:
    admin = admin_client(settings)
    await admin.start()
    try:
        return (await partition_counts(admin, [topic]))[topic]
    finally:
        await admin.close()


async def wait_until(predicate: Any, timeout_s: float = 60.0, every_s: float = 0.2) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await predicate() if asyncio.iscoroutinefunction(predicate) else predicate():
            return
        await asyncio.sleep(every_s)
    raise AssertionError(f"condition not met within {timeout_s}s")
