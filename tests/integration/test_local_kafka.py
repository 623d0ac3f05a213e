"""The local broker as tests and workers use it: one broker, transactions on.

The broker is shared with the other integration modules, so nothing here stops
it: the session fixture in conftest.py stops it only if it started it.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from eddy.errors import LocalKafkaError
from eddy.settings import load_settings
from tools import localkafka

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bootstrap() -> str:
    return load_settings().bootstrap_servers


@pytest.fixture
async def topic(bootstrap: str) -> AsyncIterator[str]:
    """A topic of this test's own (auto-create is off, so it is created here)."""
    name = f"localkafka-{uuid.uuid4().hex[:12]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
        yield name
        await admin.delete_topics([name])
    finally:
        await admin.close()


def test_ensure_running_twice_keeps_one_broker() -> None:
    localkafka.ensure_running()  # the session fixture already did: this is a no-op
    pid = localkafka.running_pid()
    if pid is None:
        pytest.skip("the broker in use was not started by eddy (remote or external)")
    assert localkafka.ensure_running() is False
    assert localkafka.running_pid() == pid
    assert localkafka.is_running()


async def test_transactions_commit_and_abort_with_replication_factor_1(
    bootstrap: str, topic: str
) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"localkafka-test-{uuid.uuid4().hex}"
    )
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"aborted")
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send_and_wait(topic, b"committed")
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        seen: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while b"committed" not in seen and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            seen.extend(record.value for records in batch.values() for record in records)
    finally:
        await consumer.stop()
    assert seen == [b"committed"]


def test_status_exit_code_says_whether_eddys_broker_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tools", "kafka", "status"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    expected = 0 if localkafka.is_running() else 1
    assert result.returncode == expected, result.stdout + result.stderr
    assert "bootstrap  127.0.0.1:9092" in result.stdout


def test_wait_until_ready_returns_for_a_live_broker(bootstrap: str) -> None:
    started = time.monotonic()
    localkafka.wait_until_ready(bootstrap, timeout_s=30)
    assert time.monotonic() - started < 30


def test_wait_until_ready_gives_up_on_a_silent_port() -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(LocalKafkaError, match="no Kafka broker answered"):
        localkafka.wait_until_ready(f"127.0.0.1:{port}", timeout_s=1.5)
