"""schemathesis against a running worker's OpenAPI schema: every read operation, with
generated parameters (valid and not), never answers 5xx, and every documented
response matches its schema."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.kafka import produce, read_all, readings_topic, unique_settings
from tests.support.processes import WorkerProcess

pytestmark = pytest.mark.e2e

BASE_MS = (time.time_ns() // 3_600_000_000_000 - 1) * 3_600_000
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
]
AGENTS = ("sensor_averages", "sensor_alerts", "hashtag_counts", "team_powerups")


@pytest.mark.timeout(600)
async def test_no_operation_answers_5xx_or_breaks_its_schema(tmp_path: Path) -> None:
    config = unique_settings(tmp_path, agents=AGENTS)
    worker = WorkerProcess(config, tmp_path / "worker.log")
    try:
        worker.wait_ready()
        rows = [
            {"sensor_id": f"sensor_{i % 3}", "timestamp_ms": BASE_MS + i * 100, "temperature": 20.5}
            for i in range(300)
        ]
        encoded = [(str(r["sensor_id"]).encode(), orjson.dumps(r)) for r in rows]
        await produce(config, readings_topic(config), encoded)
        await read_all(config, config.topic("sensor-averages"), min_records=3)
        schema = schemathesis.openapi.from_url(f"{worker.base}/openapi.json")
        # Reads only: fuzzing POST /snapshots would take real snapshots.
        operations = [result.ok() for result in schema.get_all_operations()]
        operations = [op for op in operations if op.method.upper() == "GET"]
        assert len(operations) >= 15
        for operation in operations:
            # Mostly unknown keys and bad parameters, some real sensors (a key is
            # {key} in every path: a sensor's, a hashtag's, a team's...).
            strategy = operation.as_strategy()

            @given(case=strategy, sensor=st.sampled_from(["sensor_0", "sensor_1", None]))
            @settings(
                max_examples=15,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                database=None,
            )
            def run(case: schemathesis.Case, sensor: str | None) -> None:
                if sensor is not None and case.path_parameters and "key" in case.path_parameters:
                    case.path_parameters["key"] = sensor
                case.call_and_validate(base_url=worker.base, checks=CHECKS)

            run()
    finally:
        worker.stop()
