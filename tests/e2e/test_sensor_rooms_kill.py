"""Exactly-once enrichment across a crash: a worker killed with lookups in flight;
its successor looks those readings up again, and every reading is in the committed
output once, with its room."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from eddy.examples.sensor_rooms import UNKNOWN_ROOM
from eddy.kafka_clients import connection_kwargs
from eddy.settings import Settings
from tests.support.kafka import (
    create_topics,
    produce,
    read_all,
    readings_topic,
    unique_settings,
    wait_until,
)
from tests.support.processes import WorkerProcess, agent_env
from tests.support.rooms import RoomService
from tools.simulator.rooms import room_of

pytestmark = pytest.mark.e2e

READINGS = 6_000
# An hour ago, on the hour: the output carries event time as its Kafka timestamp, and
# the broker's retention check (every 5 min) deletes segments whose newest timestamp
# is older than 7 days. With 1970 timestamps it deleted the first committed
# transaction of every output partition whenever a check fell inside a run.
BASE_MS = (time.time_ns() // 3_600_000_000_000 - 1) * 3_600_000


def rows() -> list[tuple[bytes, bytes]]:
    out = []
    for i in range(READINGS):
        sensor = f"sensor_{i % 40 + 1}"
        body = {"sensor_id": sensor, "timestamp_ms": BASE_MS + i, "temperature": 20.0}
        out.append((sensor.encode(), orjson.dumps(body)))
    return out


async def test_lookups_in_flight_at_a_crash_are_redone_and_output_once(tmp_path: Path) -> None:
    service = RoomService(tmp_path / "rooms.log", latency_ms=20, jitter_ms=20)
    settings = unique_settings(tmp_path, agents=("sensor_rooms",), commit_interval_ms=300)
    # sensor_rooms' own settings (agents/settings.py: RoomSettings), as workers read them.
    rooms_env = agent_env(room_service_url=service.url, lookup_capacity=50)
    await create_topics(settings)
    data = rows()
    first = WorkerProcess(settings, tmp_path / "first.log", **rooms_env)
    second: WorkerProcess | None = None
    try:
        first.wait_ready()
        feed = asyncio.create_task(_feed(settings, data))

        def halfway() -> bool:
            status = first.status()["stages"]["sensor_rooms"]
            return bool(status["records_in"] >= READINGS // 4 and status["commits"] >= 2)

        await wait_until(halfway, timeout_s=120)
        first.stop(signal.SIGKILL)  # lookups in flight, a transaction open
        await feed
        second = WorkerProcess(settings, tmp_path / "second.log", **rooms_env)
        try:
            second.wait_ready()
            out = await read_all(
                settings, settings.topic("sensor-rooms"), min_records=READINGS, timeout_s=180
            )
            status = second.status() if second.process.poll() is None else None
        finally:
            second.stop()
        stats = service.stats()
    finally:
        service.stop()

    seen = [orjson.loads(r.value) for r in out]
    ids = [(r["sensor_id"], r["timestamp_ms"]) for r in seen]
    if not len(ids) == len(set(ids)) == READINGS:
        report = await _diagnose(settings, out, [first, second], stats, status)
        pytest.fail(f"{len(set(ids))} distinct of {len(ids)} enriched, {READINGS} fed\n{report}")
    for record in seen:
        assert record["room"] == (room_of(record["sensor_id"]) or UNKNOWN_ROOM)
    # Some readings were looked up twice: before the crash and again after it.
    assert stats["requests"] > READINGS
    # The successor stopped cleanly: its HTTP session closed with its event loop.
    assert "Unclosed client session" not in second.log_path.read_text(errors="replace")


async def _feed(settings: Settings, data: list[tuple[bytes, bytes]]) -> None:
    for start in range(0, len(data), 500):
        await produce(settings, readings_topic(settings), data[start : start + 500])
        await asyncio.sleep(0.2)


async def _diagnose(
    settings: Settings,
    out: list[ConsumerRecord[bytes, bytes]],
    workers: list[WorkerProcess | None],
    stats: dict[str, object],
    status: dict[str, object] | None,
) -> str:
    """Where the missing readings sit in the input, what the group committed, what
    each partition output, and the tail of each worker's log."""
    fed = await read_all(settings, readings_topic(settings), committed=False, timeout_s=30)
    position = {}
    for record in fed:
        body = orjson.loads(record.value)
        position[(body["sensor_id"], body["timestamp_ms"])] = (record.partition, record.offset)
    values = [orjson.loads(r.value) for r in out]
    seen = Counter((v["sensor_id"], v["timestamp_ms"]) for v in values)
    missing: dict[int, list[int]] = {}
    for reading, (partition, offset) in position.items():
        if reading not in seen:
            missing.setdefault(partition, []).append(offset)
    twice = sorted(r for r, n in seen.items() if n > 1)
    dead = await read_all(settings, settings.dead_letters, committed=False, timeout_s=10)
    committed, log_start = await _offsets(settings, sorted({p for p, _ in position.values()}))
    lines = [
        f"fed per partition: {dict(sorted(Counter(p for p, _ in position.values()).items()))}",
        f"output per partition: {dict(sorted(Counter(r.partition for r in out).items()))}",
        f"committed input offsets: {committed}",
        f"output log start offsets (above 0: the broker deleted records): {log_start}",
        "missing (input partition: count, offsets): "
        + repr({p: (len(o), min(o), max(o)) for p, o in sorted(missing.items())}),
        f"twice: {len(twice)} {twice[:5]}",
        f"dead letters: {len(dead)} {[r.value[:300] for r in dead[:3]]!r}",
        f"room service: {stats}",
        f"second worker at the end: {status}",
    ]
    for worker in workers:
        if worker is not None:
            lines.append(f"--- {worker.log_path.name} (exit {worker.process.returncode})")
            lines.append(worker.log())
    return "\n".join(lines)


async def _offsets(
    settings: Settings, partitions: list[int]
) -> tuple[dict[int, int | None], dict[int, int]]:
    """The group's committed input offsets and the output's log start offsets."""
    consumer = AIOKafkaConsumer(
        **connection_kwargs(settings), group_id=f"{settings.app_id}.sensor_rooms"
    )
    await consumer.start()
    try:
        inputs = [TopicPartition(readings_topic(settings), p) for p in partitions]
        committed = {tp.partition: await consumer.committed(tp) for tp in inputs}
        outputs = [TopicPartition(settings.topic("sensor-rooms"), p) for p in partitions]
        starts = await consumer.beginning_offsets(outputs)
        return committed, {tp.partition: offset for tp, offset in sorted(starts.items())}
    finally:
        await consumer.stop()
