"""schemathesis against a running worker's OpenAPI schema: every operation of the
reference app, with generated parameters and bodies (valid and not), never answers
5xx, and every response matches what the schema declares for it (status, content
type, body)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import orjson
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from eddy.examples.app import app
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
# Every agent with routes; the two left out serve none and need a room service or
# PostgreSQL to start.
AGENTS = tuple(name for name in app.agent_names if name not in {"sensor_rooms", "postgres_sink"})
# Each accepted POST starts a real snapshot or savepoint: a few are enough to check
# the 202 and its body, and not so many that they queue behind each other for long.
EXAMPLES = {"GET": 15, "DELETE": 15, "POST": 4}


def fuzz(operation: schemathesis.APIOperation, base: str, examples: int) -> None:
    """``examples`` generated calls of one operation, valid and not, each checked."""
    strategy = st.one_of(
        operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
        operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
    )

    # Mostly unknown keys and bad parameters, some real sensors (a key is {key} in
    # every path: a sensor's, a hashtag's, a team's...).
    @given(case=strategy, sensor=st.sampled_from(["sensor_0", "sensor_1", None]))
    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def run(case: schemathesis.Case, sensor: str | None) -> None:
        if sensor is not None and case.path_parameters and "key" in case.path_parameters:
            case.path_parameters["key"] = sensor
        case.call_and_validate(base_url=base, checks=CHECKS)

    run()


def stop_case(stop: schemathesis.APIOperation) -> Callable[[object], schemathesis.Case]:
    return lambda body: stop.Case(body=body, media_type="application/json")


@pytest.mark.timeout(900)
async def test_every_operation_answers_as_its_schema_says(tmp_path: Path) -> None:
    config = unique_settings(tmp_path, agents=AGENTS, snapshot_root=str(tmp_path / "snapshots"))
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
        operations = [result.ok() for result in schema.get_all_operations()]
        # POST /stop stops the worker: it goes last, below.
        stop = next(op for op in operations if op.method.upper() == "POST" and op.path == "/stop")
        others = [op for op in operations if op is not stop]
        assert len(others) >= 40, [f"{op.method} {op.path}" for op in others]
        assert {op.method.upper() for op in others} == {"GET", "POST", "DELETE"}
        for operation in others:
            fuzz(operation, worker.base, EXAMPLES[operation.method.upper()])
        # Bodies /stop refuses (422; 400 if they are not JSON) leave the worker running.
        # Negative generation may also leave the optional body out, or send {}: both
        # valid, they would stop the worker, so they are kept for the end.
        negative_stop = stop.as_strategy(generation_mode=GenerationMode.NEGATIVE).filter(
            lambda case: (
                isinstance(case.body, list | str | int | float | bool)
                or (isinstance(case.body, dict) and case.body != {})
            )
        )
        misspelt = [{"savepont": True}, {"savepoint": "yes"}, {"savepoint": 1}, [True]]

        @given(case=st.one_of(negative_stop, st.sampled_from(misspelt).map(stop_case(stop))))
        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
        def refused(case: schemathesis.Case) -> None:
            response = case.call_and_validate(base_url=worker.base, checks=CHECKS)
            assert response.status_code in (400, 422), (case.body, response.text)

        refused()
        assert worker.get("/readyz").status_code == 200
        # ...and the one it accepts stops it, as a 202 that matches the schema.
        response = stop.Case(body={"savepoint": False}).call_and_validate(
            base_url=worker.base, checks=CHECKS
        )
        assert response.status_code == 202, response.text
        assert worker.process.wait(timeout=120) == 0, worker.log()
    except httpx.HTTPError as exc:
        raise AssertionError(f"{exc}\n{worker.log()}") from exc
    finally:
        worker.stop()
