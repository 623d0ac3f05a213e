"""The reference app on Avro: with EDDY_READINGS_FORMAT=avro the simulator writes
sensor readings in the schema registry's wire format and sensor_averages, whose
logic is unchanged, averages them as it does JSON readings."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import orjson
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from eddy.examples.topics import SENSOR_READING_AVRO
from eddy.worker import Worker
from tests.support.kafka import HOUR_AGO_MS, read_all, readings_topic, unique_settings
from tests.support.registry import registry_env, registry_url  # noqa: F401
from tools.simulator.generator import SimulationConfig
from tools.simulator.producer import produce

pytestmark = pytest.mark.integration


async def test_sensor_averages_averages_avro_readings_from_the_simulator(
    tmp_path: Any,
    registry_env: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EDDY_READINGS_FORMAT", "avro")
    settings = unique_settings(tmp_path)
    worker = Worker(settings)
    await worker.start()
    try:
        config = SimulationConfig(
            rate_per_s=1_000,
            seed=3,
            start_ms=HOUR_AGO_MS,
            sensors=4,
            count=12_000,
            outage_probability=0.0,
            disorder_ms=500,
        )
        stats = await produce(config, settings, pace=False, duration_s=None, progress=False)
        written = await read_all(settings, readings_topic(settings), min_records=stats.sent)
        averages = await read_all(settings, settings.topic("sensor-averages"), min_records=8)
        dead = await read_all(settings, settings.dead_letters, quiet_s=0.5)
    finally:
        await worker.stop()

    # The simulator wrote Avro that confluent-kafka's deserializer reads.
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_env}))
    ctx = SerializationContext(readings_topic(settings), MessageField.VALUE)
    readings = [deserialize(r.value, ctx) for r in written]
    assert len(readings) == stats.sent == 12_000
    assert set(readings[0]) == {f["name"] for f in SENSOR_READING_AVRO["fields"]}
    assert dead == [], "an Avro reading was dead-lettered"
    # Each closed window is the average of its readings.
    by_window: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in readings:
        start = r["timestamp_ms"] - r["timestamp_ms"] % 5_000
        by_window[(r["sensor_id"], start)].append(r["temperature"])
    results = [orjson.loads(r.value) for r in averages]
    assert len(results) >= 8, "two windows per sensor closed"
    for result in results:
        temps = by_window[(result["sensor_id"], result["window_start_ms"])]
        assert result["count"] == len(temps)
        assert result["avg"] == pytest.approx(sum(temps) / len(temps))
    assert (
        json.loads(
            SchemaRegistryClient({"url": registry_env})
            .get_latest_version(f"{readings_topic(settings)}-value")
            .schema.schema_str
        )["name"]
        == "SensorReading"
    )
