"""``eddy consume`` on the real broker: it reads back, decoded, what ``eddy send``
wrote (keys, values, headers; JSON and Avro through the schema registry), never
shows an aborted transaction's records, reads a topic the app does not declare
raw, and refuses one that does not exist in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from eddy.kafka_clients import connection_kwargs
from eddy.settings import Settings, build
from tests.support.registry import registry_env, registry_url  # noqa: F401

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
APP = """\
from pydantic import BaseModel

from eddy import App, Avro, Topic


class Reading(BaseModel):
    sensor_id: str
    timestamp_ms: int
    temperature: float


SCHEMA = {
    "type": "record",
    "name": "Reading",
    "namespace": "consume.test",
    "fields": [
        {"name": "sensor_id", "type": "string"},
        {"name": "timestamp_ms", "type": "long"},
        {"name": "temperature", "type": "double"},
    ],
}
app = App("consume-test")
app.stream(
    Topic("readings", Reading, key="sensor_id", timestamp="timestamp_ms"), name="copy"
).to(Topic("copies"))
avro_app = App("consume-avro")  # an app of Avro topics needs the registry to build
avro_app.stream(
    Topic("avro-readings", Reading, key="sensor_id", serde=Avro(SCHEMA)), name="copy_avro"
).to(Topic("avro-copies"))
"""
READINGS = [
    {"sensor_id": "s1", "timestamp_ms": 1000, "temperature": 61.5},
    {"sensor_id": "s2", "timestamp_ms": 2000, "temperature": 40.0},
    {"sensor_id": "s1", "timestamp_ms": 3000, "temperature": 62.25},
]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An app of its own, with topics of its own, for ``python -m eddy``."""
    (tmp_path / "consumeapp.py").write_text(APP)
    tag = uuid.uuid4().hex[:8]
    values = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    values.update(
        EDDY_APP="consumeapp:app",
        EDDY_APP_ID=f"test-{tag}",
        EDDY_TOPIC_PREFIX=f"t-{tag}-",
        EDDY_DEAD_LETTER_TOPIC=f"dead-{tag}",
        EDDY_PARTITIONS="2",
        EDDY_SNAPSHOT_ROOT=str(tmp_path / "snapshots"),
        EDDY_SAVEPOINT_ROOT=str(tmp_path / "savepoints"),
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
    )
    return values


def eddy(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eddy", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def sent_and_read_back(env: dict[str, str], topic: str) -> list[dict[str, Any]]:
    created = eddy(env, "topics", "create")
    assert created.returncode == 0, created.stderr
    for number, reading in enumerate(READINGS):
        done = eddy(env, "send", topic, json.dumps(reading), "--header", f"n={number}")
        assert done.returncode == 0, done.stderr
    read = eddy(env, "consume", topic, "--count", str(len(READINGS)), "--json")
    assert read.returncode == 0, read.stderr
    assert read.stderr.strip() == f"consume: {len(READINGS)} records"
    return [json.loads(line) for line in read.stdout.splitlines()]


def assert_equal_to_what_was_sent(lines: list[dict[str, Any]]) -> None:
    # Two partitions: the order holds within each key's partition, not across.
    got = sorted(
        ((line["key"], line["value"], line["headers"]) for line in lines),
        key=lambda item: item[1]["timestamp_ms"],
    )
    assert got == [(r["sensor_id"], r, {"n": str(number)}) for number, r in enumerate(READINGS)]
    assert all(set(line) == {"partition", "offset", "timestamp_ms", "key", "value", "headers"}
               for line in lines)  # fmt: skip
    assert all(isinstance(line["timestamp_ms"], int) for line in lines)


def test_consume_reads_back_what_send_wrote_decoded(env: dict[str, str]) -> None:
    assert_equal_to_what_was_sent(sent_and_read_back(env, "readings"))
    # The text form: one line a record, the key and the decoded value in it.
    text = eddy(env, "consume", "readings", "--timeout-ms", "2000")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == 3
    assert any(
        "key=s2 value=" + json.dumps(READINGS[1], separators=(",", ":")) in line for line in lines
    )
    assert all('headers={"n":' in line for line in lines)


def test_consume_reads_a_schema_registry_topic_decoded(
    env: dict[str, str],
    registry_env: str,  # noqa: F811
) -> None:
    env = {**env, "EDDY_SCHEMA_REGISTRY_URL": registry_env, "EDDY_APP": "consumeapp:avro_app"}
    assert_equal_to_what_was_sent(sent_and_read_back(env, "avro-readings"))
    # Named as on the broker (prefix and all), it is the same topic, decoded alike.
    full = eddy(
        env, "consume", f"{env['EDDY_TOPIC_PREFIX']}avro-readings", "--count", "3", "--json"
    )
    assert full.returncode == 0, full.stderr
    assert_equal_to_what_was_sent([json.loads(line) for line in full.stdout.splitlines()])


async def test_an_aborted_transaction_never_shows(env: dict[str, str]) -> None:
    created = eddy(env, "topics", "create")
    assert created.returncode == 0, created.stderr
    settings = build(Settings, {"topic_prefix": env["EDDY_TOPIC_PREFIX"]})
    topic = settings.topic("readings")
    producer = AIOKafkaProducer(
        transactional_id=f"{env['EDDY_APP_ID']}-aborts", **connection_kwargs(settings)
    )
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, json.dumps(READINGS[2]).encode(), key=b"s1")
        await producer.begin_transaction()
        await producer.send_and_wait(topic, json.dumps(READINGS[0]).encode(), key=b"s1")
        await producer.abort_transaction()
    finally:
        await producer.stop()
    read = eddy(env, "consume", "readings", "--json", "--timeout-ms", "3000")
    assert read.returncode == 0, read.stderr
    assert [json.loads(line)["value"] for line in read.stdout.splitlines()] == [READINGS[2]]


def test_undeclared_topics_raw_and_unknown_ones_refused(env: dict[str, str]) -> None:
    created = eddy(env, "topics", "create")
    assert created.returncode == 0, created.stderr
    # The dead-letter topic is the app's, but no agent declares it: read raw, said once.
    dead_letters = env["EDDY_TOPIC_PREFIX"] + env["EDDY_DEAD_LETTER_TOPIC"]
    dead = eddy(env, "consume", dead_letters, "--timeout-ms", "1000")
    assert dead.returncode == 0, dead.stderr
    notes = [line for line in dead.stderr.splitlines() if "shown raw" in line]
    assert len(notes) == 1
    assert "its topics: copies, readings" in notes[0]
    missing = eddy(env, "consume", "no-such-topic", "--count", "1")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1:] == [
        "eddy: consume: no topic 'no-such-topic' on the broker (the app's topics: copies, readings)"
    ]


def test_follow_ends_on_ctrl_c_with_exit_code_0(env: dict[str, str]) -> None:
    created = eddy(env, "topics", "create")
    assert created.returncode == 0, created.stderr
    sent = eddy(env, "send", "readings", json.dumps(READINGS[0]))
    assert sent.returncode == 0, sent.stderr
    follow = subprocess.Popen(
        [sys.executable, "-m", "eddy", "consume", "readings", "--follow", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = follow.stdout.readline() if follow.stdout else ""
        assert json.loads(first)["value"] == READINGS[0]
        follow.send_signal(signal.SIGINT)
        _, err = follow.communicate(timeout=30)
    finally:
        follow.kill()
    assert follow.returncode == 0
    assert err.strip() == "consume: 1 records"  # no traceback
