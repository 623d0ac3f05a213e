"""Watermarks across a repartition topic (``key_by``), on the real broker: the
downstream clock is the minimum over the upstream tasks, minus idle ones."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from pydantic import BaseModel

from eddy import App, BoundedOutOfOrderness, Count, Topic, Tumbling
from eddy.settings import Settings
from eddy.topics import TopicSpec, ensure_topics
from eddy.worker import Worker
from tests.support.kafka import read_all, unique_settings

pytestmark = pytest.mark.integration
IDLE_TIMEOUT_MS = 3_000


class Event(BaseModel):
    group: str
    ts: int


async def send(settings: Settings, topic: str, partition: int, *timestamps: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers)
    await producer.start()
    try:
        for ts in timestamps:
            body = orjson.dumps({"group": "g", "ts": ts})
            await producer.send_and_wait(topic, body, key=b"x", partition=partition)
    finally:
        await producer.stop()


async def windows(settings: Settings, topic: str, quiet_s: float) -> list[tuple[int, int]]:
    records = await read_all(settings, topic, quiet_s=quiet_s, timeout_s=quiet_s + 5)
    return sorted(
        (orjson.loads(r.value)["window_start_ms"], orjson.loads(r.value)["value"]) for r in records
    )


async def test_downstream_windows_wait_for_every_upstream_partition_but_not_an_idle_one(
    tmp_path: Path,
) -> None:
    tag = uuid.uuid4().hex[:8]
    events, counts = f"events-{tag}", f"counts-{tag}"
    settings = unique_settings(
        tmp_path,
        commit_interval_ms=100,
        partitions=2,
        topic_prefix="",
        agents=None,
        upstream_idle_timeout_ms=IDLE_TIMEOUT_MS,
    )
    await ensure_topics(settings, [TopicSpec(events, 3)])
    app = App("repartition")
    # Producers key these records by nothing in particular: counting per group
    # needs a repartition, which key_by does.
    (
        app.stream(Topic(events, Event, timestamp="ts"), name="group_counts",
                   watermark=BoundedOutOfOrderness(0))
        .key_by("group")
        .window(Tumbling(10_000))
        .aggregate(Count())
        .to(Topic(counts))
    )  # fmt: skip
    worker = Worker(settings, app)
    await worker.start()
    try:
        await send(settings, events, 0, 0, 3_000, 9_000, 25_000)  # partition 0: wm 24_999
        await send(settings, events, 1, 1_000, 15_000)  # partition 1: wm 14_999
        await send(settings, events, 2, 2_000)  # partition 2: wm 1_999 holds everything back
        # Keep partition 2 talking (below 10 s) so it is not idle, and check nothing fires.
        for ts in (2_100, 2_200, 2_300, 2_400):
            await asyncio.sleep(1.0)
            await send(settings, events, 2, ts)
        assert await windows(settings, counts, quiet_s=0.5) == []

        await send(settings, events, 2, 12_000)  # every upstream is past 9_999 now
        assert await windows(settings, counts, quiet_s=2.0) == [(0, 9)]

        # Partition 2 goes quiet at 12_000; the others move on. After the idle timeout
        # the downstream clock ignores it, so [10 s, 20 s) fires without it.
        started = time.monotonic()
        await send(settings, events, 1, 30_000)
        for _ in range(100):
            if (10_000, 2) in await windows(settings, counts, quiet_s=0.3):
                break
        waited_s = time.monotonic() - started
        assert (10_000, 2) in await windows(settings, counts, quiet_s=0.3)
        assert waited_s < IDLE_TIMEOUT_MS / 1000 + 10
    finally:
        await worker.stop()
