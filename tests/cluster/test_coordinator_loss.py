"""The broker that coordinates a worker's transactions dies mid-transaction.

On a three-broker cluster (replication 3, ``min.insync.replicas=2``) a worker runs
Kafka's exactly-once test application while input flows; the broker that is the
transaction coordinator of one of its tasks is killed with ``kill -9``. A user
notices two things: whether that task's results keep coming (committed, so a
``read_committed`` reader sees them) within the transaction timeout, and whether
the worker still stops within a Kubernetes grace period when asked. Before the
fix, the worker kept sending ``EndTxn`` to the dead broker for ever and ignored
SIGTERM for more than a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from eddy.settings import Settings, load_settings
from eddy.topics import admin_client
from tools.chaos.cluster import Cluster, WorkerProc
from tools.kafkaeos import topics
from tools.kafkaeos.app import app
from tools.localkafka.cluster import Brokers
from tools.localkafka.config import KafkaVersion

REPO = Path(__file__).resolve().parents[2]
BASE_PORT = 29092  # apart from the shared broker (9092) and `make eos-kafka`'s cluster
TRANSACTION_TIMEOUT_MS = 30_000  # the default, as users run it
GRACE_S = 30.0  # Kubernetes' default terminationGracePeriodSeconds
# How long until the task commits again. A dead broker closes its connections and
# is replaced within the transaction timeout. A hung one answers nothing: each
# request to it waits out its timeout (docs/fleet.md has the figures), so more.
BUDGET_S = {"kill": TRANSACTION_TIMEOUT_MS / 1000, "hang": 120.0}
TRANSACTION_COORDINATOR = 1  # FindCoordinator's key type of a transactional id


@pytest.fixture(scope="module")
def brokers() -> Iterator[Brokers]:
    cluster = Brokers(KafkaVersion.parse("3.9.2"), nodes=3, base_port=BASE_PORT)
    cluster.wipe()  # every run formats anew: no topics or groups of an earlier run
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.wipe()


@pytest.fixture
async def worker(brokers: Brokers, tmp_path: Path) -> AsyncIterator[tuple[Cluster, WorkerProc]]:
    settings = _settings(brokers, tmp_path)
    await topics.recreate(settings, settings.partitions)
    cluster = Cluster(settings, tmp_path, ("eos", "eos_repartitioned"), {"PYTHONPATH": str(REPO)})
    try:
        proc = cluster.spawn("w1")
        await cluster.wait_ready(proc, timeout_s=120)
        yield cluster, proc
    finally:
        await cluster.stop_all(5.0)
        await cluster.close()


def _settings(brokers: Brokers, run_dir: Path) -> Settings:
    return load_settings(
        app.settings_classes(),
        app="tools.kafkaeos.app:app",
        app_id="coordinator-loss",
        bootstrap_servers=brokers.bootstrap,
        topic_prefix="",
        dead_letter_topic="coordinator-loss-dead-letters",
        commit_interval_ms=100,
        transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
        partitions=2,
        replication_factor=3,
        state_dir=run_dir / "state",
        api_port=0,
        worker_id="coordinator-loss",
    )


async def _feed(bootstrap: str, stop: asyncio.Event) -> int:
    """Keyed records to ``data`` until ``stop``: both partitions always have work."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    sent = 0
    try:
        while not stop.is_set():
            # Kafka's Integer serde: 4 bytes, big-endian.
            sends = [
                producer.send_and_wait("data", sent.to_bytes(4, "big"), key=key)
                for key in (b"a", b"b", b"c", b"d")
            ]
            done = await asyncio.gather(*sends, return_exceptions=True)  # a broker is lost
            sent += sum(1 for d in done if not isinstance(d, BaseException))
            await asyncio.sleep(0.02)
    finally:
        await producer.stop()
    return sent


async def _coordinator(settings: Settings, transactional_id: str) -> int:
    admin = admin_client(settings)
    await admin.start()
    try:
        node: int = await admin.find_coordinator(transactional_id, TRANSACTION_COORDINATOR)
        return node
    finally:
        await admin.close()


async def _committed_end(bootstrap: str, tp: TopicPartition) -> int:
    """``tp``'s last stable offset: it moves only when a transaction commits."""
    consumer = AIOKafkaConsumer(
        # A hung broker would hold the request 40 s: ask again instead.
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        request_timeout_ms=3_000,
    )
    await consumer.start()
    try:
        offsets = await consumer.end_offsets([tp])
        return int(offsets[tp])
    finally:
        await consumer.stop()


async def _until_committed_past(
    bootstrap: str, tp: TopicPartition, offset: int, timeout_s: float
) -> float:
    """Seconds until ``tp``'s committed end passes ``offset``; fails after ``timeout_s``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        with contextlib.suppress(Exception):  # metadata moving after the kill
            if await _committed_end(bootstrap, tp) > offset:
                return time.monotonic() - started
        await asyncio.sleep(0.25)
    raise AssertionError(f"{tp} committed nothing past {offset} within {timeout_s:.0f} s")


# The hang takes minutes (its figures are in docs/fleet.md): `make fleet` runs it.
@pytest.mark.parametrize("fault", ["kill", pytest.param("hang", marks=pytest.mark.slow)])
async def test_a_lost_transaction_coordinator_is_replaced_within_the_timeout(
    brokers: Brokers, worker: tuple[Cluster, WorkerProc], fault: str
) -> None:
    """``kill``: kill -9, its connections close. ``hang``: SIGSTOP, its connections
    stay open and answer nothing, as when a network cut isolates the broker."""
    cluster, proc = worker
    settings = cluster.settings
    echo = TopicPartition("echo", 0)
    stop = asyncio.Event()
    feeding = asyncio.create_task(_feed(brokers.bootstrap, stop))
    try:
        before = await _committed_end(brokers.bootstrap, echo)
        await _until_committed_past(brokers.bootstrap, echo, before + 50, 60.0)
        node = await _coordinator(settings, f"{settings.app_id}-eos-0")
        killed_at = await _committed_end(brokers.bootstrap, echo)
        _lose(brokers, node, fault)  # records flow, commits are 100 ms apart: one is open
        waited_s = await _until_committed_past(
            brokers.bootstrap, echo, killed_at + 50, BUDGET_S[fault]
        )
        print(f"\nbroker {node} (coordinator of eos-0), {fault}: commits after {waited_s:.1f} s")
    finally:
        stop.set()
        await feeding
    cluster.signal(proc, signal.SIGTERM)
    started = time.monotonic()
    code = await cluster.wait_exit(proc, GRACE_S)
    assert code == 0, f"the worker did not stop cleanly within {GRACE_S:.0f} s of SIGTERM: {code}"
    print(f"stopped {time.monotonic() - started:.1f} s after SIGTERM")
    _restore(brokers, node, fault)


def _lose(brokers: Brokers, node: int, fault: str) -> None:
    if fault == "kill":
        brokers.kill(node)
    else:
        pid = brokers.pid(node)
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)


def _restore(brokers: Brokers, node: int, fault: str) -> None:
    if fault == "kill":
        brokers.start_node(node)
    elif (pid := brokers.pid(node)) is not None:
        os.kill(pid, signal.SIGCONT)
