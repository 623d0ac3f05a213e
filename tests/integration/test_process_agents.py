"""Process functions on the real broker, written with the public API: two inputs
(a co-process function), broadcast state, timers, and inputs re-keyed when their
partition counts differ."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

import orjson
import pytest
from pydantic import BaseModel, Field

from eddy import App, BroadcastContext, Context, Topic, ValueState
from eddy.examples.records import SensorReading
from eddy.settings import Settings
from eddy.topics import TopicSpec, ensure_topics
from eddy.worker import Worker
from tests.support.kafka import HOUR_AGO_MS, produce, read_all, unique_settings

pytestmark = pytest.mark.integration


class ThresholdUpdate(BaseModel):
    sensor_id: Annotated[str, Field(min_length=1)]
    threshold: float


class Switch(BaseModel):
    sensor_id: Annotated[str, Field(min_length=1)]
    duration_ms: int


LAST_TEMP = ValueState("last_temp", float)
FORWARDING = ValueState("forwarding", bool)
TIMER = ValueState("timer", int)


class UpdatableTemperatureAlert:
    """Thresholds per sensor arrive on a broadcast topic (``0.0`` removes one); only
    sensors with a threshold alert on a change larger than it."""

    def process_broadcast_element(self, update: ThresholdUpdate, ctx: BroadcastContext) -> None:
        thresholds = ctx.broadcast_state("thresholds")
        if update.threshold != 0.0:
            thresholds[update.sensor_id] = update.threshold
        else:
            thresholds.pop(update.sensor_id, None)
        ctx.save_broadcast("thresholds", thresholds)

    def process_element(self, reading: SensorReading, ctx: Context) -> None:
        threshold = ctx.broadcast("thresholds").get(reading.sensor_id)
        last_temp = ctx.state(LAST_TEMP)
        previous = last_temp.get()
        if threshold is not None and previous is not None:
            diff = abs(reading.temperature - previous)
            if diff > threshold:
                ctx.output({"sensor_id": reading.sensor_id, "diff": diff})
        last_temp.set(reading.temperature)


class ReadingFilter:
    """Readings connected with switches: a switch forwards its sensor's readings
    until a processing-time timer turns it off."""

    def process_element1(self, reading: SensorReading, ctx: Context) -> None:
        if ctx.state(FORWARDING).get():
            ctx.output(reading)

    def process_element2(self, switch: Switch, ctx: Context) -> None:
        ctx.state(FORWARDING).set(True)
        timer = ctx.state(TIMER)
        until = ctx.processing_time_ms + switch.duration_ms
        current = timer.get()
        if current is None or until > current:
            if current is not None:
                ctx.timer_service.delete_processing_time_timer(current)
            ctx.timer_service.register_processing_time_timer(until)
            timer.set(until)

    def on_timer(self, timestamp_ms: int, ctx: Context) -> None:
        ctx.state(FORWARDING).clear()
        ctx.state(TIMER).clear()


def encode(model: BaseModel) -> tuple[bytes, bytes]:
    data = model.model_dump()
    return str(data["sensor_id"]).encode(), orjson.dumps(data)


@pytest.fixture
def names() -> dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    return {n: f"{n}-{tag}" for n in ("readings", "control", "switches", "alerts")}


async def start(settings: Settings, app: App) -> Worker:
    worker = Worker(settings, app)
    await worker.start()
    return worker


def filter_app(names: dict[str, str], agent: str) -> App:
    app = App("filters")
    readings = app.stream(Topic(names["readings"], SensorReading, key="sensor_id"), name=agent)
    switches = app.stream(Topic(names["switches"], Switch, key="sensor_id"))
    states = [FORWARDING, TIMER]
    readings.connect(switches).process(ReadingFilter(), states=states).to(Topic(names["alerts"]))
    return app


@pytest.fixture
async def threshold_worker(
    tmp_path: Path, names: dict[str, str]
) -> AsyncIterator[tuple[Settings, Worker]]:
    settings = unique_settings(tmp_path, topic_prefix="", agents=None)
    app = App("thresholds")
    readings = Topic(names["readings"], SensorReading, key="sensor_id")
    control = Topic(names["control"], ThresholdUpdate, partitions=1)
    (
        app.stream(readings, name="thresholds")
        .connect(app.broadcast(control))
        .process(UpdatableTemperatureAlert(), states=[LAST_TEMP])
        .to(Topic(names["alerts"]))
    )
    await ensure_topics(settings, [TopicSpec(names["control"], 1), TopicSpec(names["readings"], 6)])
    worker = await start(settings, app)
    try:
        yield settings, worker
    finally:
        await worker.stop()


async def test_thresholds_set_through_the_control_topic_reach_every_task(
    threshold_worker: tuple[Settings, Worker], names: dict[str, str]
) -> None:
    settings, _ = threshold_worker
    sensors = [f"sensor_{i}" for i in range(12)]  # spread over all six partitions
    updates = [ThresholdUpdate(sensor_id=s, threshold=2.0) for s in sensors]
    updates.append(ThresholdUpdate(sensor_id="sensor_0", threshold=0.0))  # 0.0 removes it
    await produce(settings, names["control"], [encode(u) for u in updates])
    await read_all(settings, names["control"], min_records=len(updates), quiet_s=1.0)
    rows = []
    for s in sensors:
        for t, temp in ((1, 70.0), (2, 71.0), (3, 75.0)):  # +1 (quiet), then +4 (alert)
            rows.append(SensorReading(sensor_id=s, timestamp_ms=HOUR_AGO_MS + t, temperature=temp))
    # The control topic is read first on start and between batches; give it a moment.

    await asyncio.sleep(2)
    await produce(settings, names["readings"], [encode(r) for r in rows])
    alerts = [
        orjson.loads(r.value) for r in await read_all(settings, names["alerts"], min_records=11)
    ]
    assert sorted(a["sensor_id"] for a in alerts) == sorted(sensors[1:])
    assert all(a["diff"] == 4.0 for a in alerts)


async def test_a_co_process_function_joins_two_co_partitioned_inputs(
    tmp_path: Path, names: dict[str, str]
) -> None:
    settings = unique_settings(tmp_path, topic_prefix="", agents=None)
    worker = await start(settings, filter_app(names, "filter"))
    try:
        await produce(
            settings, names["switches"], [encode(Switch(sensor_id="sensor_2", duration_ms=60_000))]
        )
        await asyncio.sleep(1.5)  # the switch is applied before the readings arrive
        readings = [
            SensorReading(sensor_id=s, timestamp_ms=HOUR_AGO_MS + i, temperature=float(i))
            for i, s in enumerate(["sensor_2", "sensor_7", "sensor_2"])
        ]
        await produce(settings, names["readings"], [encode(r) for r in readings])
        out = [
            orjson.loads(r.value) for r in await read_all(settings, names["alerts"], min_records=2)
        ]
        assert [(o["sensor_id"], o["temperature"]) for o in out] == [
            ("sensor_2", 0.0),
            ("sensor_2", 2.0),
        ]
    finally:
        await worker.stop()


async def test_inputs_with_different_partition_counts_are_re_keyed_not_joined_wrongly(
    tmp_path: Path, names: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    settings = unique_settings(tmp_path, topic_prefix="", agents=None)
    await ensure_topics(
        settings, [TopicSpec(names["readings"], 6), TopicSpec(names["switches"], 2)]
    )
    with caplog.at_level("WARNING", logger="eddy.pipeline.copartition"):
        worker = await start(settings, filter_app(names, "filter2"))
    try:
        assert any("not co-partitioned" in r.message for r in caplog.records)
        sensors = [f"sensor_{i}" for i in range(8)]  # the switches' 2 partitions vs 6
        switches = [encode(Switch(sensor_id=s, duration_ms=60_000)) for s in sensors]
        await produce(settings, names["switches"], switches)
        await asyncio.sleep(3)  # re-keyed and applied before the readings come
        readings = [
            SensorReading(sensor_id=s, timestamp_ms=HOUR_AGO_MS, temperature=1.0) for s in sensors
        ]
        await produce(settings, names["readings"], [encode(r) for r in readings])
        out = await read_all(settings, names["alerts"], min_records=len(sensors))
        assert sorted(orjson.loads(r.value)["sensor_id"] for r in out) == sorted(sensors)
    finally:
        await worker.stop()
