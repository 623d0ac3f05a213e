"""A record that makes pipeline code raise: the partition restarts from its last
commit (nothing half-applied), and after the configured attempts the record goes to
the dead-letter topic with the error while everything else is output exactly once."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from eddy import App, Context, Topic, ValueState
from eddy.examples.records import SensorReading
from eddy.examples.topics import READINGS
from eddy.settings import Settings
from eddy.worker import Worker
from tests.support.kafka import (
    HOUR_AGO_MS,
    produce,
    read_all,
    readings_topic,
    unique_settings,
    wait_until,
)

pytestmark = pytest.mark.integration

POISON_TEMPERATURE = 666.0


COUNT = ValueState("count", int)


def running_count(reading: SensorReading, ctx: Context) -> None:
    """Counts readings per sensor; a reading at 666 F crashes it (a bug in user code)."""
    if reading.temperature == POISON_TEMPERATURE:
        raise ZeroDivisionError("the bug this test plants")
    count = ctx.state(COUNT)
    total = (count.get() or 0) + 1
    count.set(total)
    ctx.output({"sensor_id": ctx.key, "count": total, "seq": reading.timestamp_ms})


def counting_app() -> App:
    app = App("poison")
    app.stream(READINGS, name="counting").process(running_count, states=[COUNT]).to(
        Topic("sensor-averages")
    )
    return app


def pipeline(settings: Settings) -> Any:
    return counting_app().build(settings)


def restarts(worker: Worker) -> float:
    return sum(
        sample.value
        for family in worker.metrics.registry.collect()
        for sample in family.samples
        if sample.name == "eddy_partition_restarts_total"
    )


async def test_a_poison_record_is_dead_lettered_after_its_attempts(tmp_path: Any) -> None:
    settings = unique_settings(
        tmp_path, restart_delay_ms=200, max_record_attempts=3, agents=("counting",)
    )
    worker = Worker(settings, pipeline(settings))
    await worker.start()
    try:
        readings = [
            {"sensor_id": "s1", "timestamp_ms": HOUR_AGO_MS + i, "temperature": 20.0 + i}
            for i in range(40)
        ]
        readings[25]["temperature"] = POISON_TEMPERATURE
        await produce(
            settings,
            readings_topic(settings),
            [(b"s1", orjson.dumps(r)) for r in readings],
        )
        dead = await read_all(settings, settings.dead_letters, min_records=1)
        outputs = await read_all(settings, settings.topic("sensor-averages"), min_records=39)
        await wait_until(lambda: restarts(worker) >= 3)
    finally:
        await worker.stop()

    assert [orjson.loads(r.value)["temperature"] for r in dead] == [POISON_TEMPERATURE]
    reason = dict(dead[0].headers)["eddy.reason"].decode()
    assert reason.startswith("processing failed 3 times: ZeroDivisionError")
    got = [orjson.loads(r.value) for r in outputs]
    # Each good reading counted once: no count from an aborted attempt leaked out.
    assert [o["count"] for o in got] == list(range(1, 40))
    assert [o["seq"] - HOUR_AGO_MS for o in got] == [i for i in range(40) if i != 25]
    assert restarts(worker) == 3
