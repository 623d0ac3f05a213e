"""What a StatefulSet pod does, shown with local processes: three workers named like
the pods (EDDY_WORKER_ID) with a state directory each (their PVCs). One is killed
with SIGKILL and started again on its old directory, as the kubelet restarts a
crashed container in place. It must get its partitions back and resume from its
local RocksDB instead of restoring them, while the other two keep answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from eddy.kafka_clients import connection_kwargs
from eddy.settings import Settings
from eddy.topics import changelog_topic
from tests.e2e.test_restore import BASE_MS, encoded
from tests.support.kafka import create_topics, produce, readings_topic, unique_settings
from tests.support.processes import WorkerProcess

pytestmark = pytest.mark.e2e

STAGE = "sensor_averages"
# Enough sensors that every one of the 6 partitions holds state.
SENSORS = [f"sensor_{i}" for i in range(60)]


def readings(count: int, seed: int) -> list[tuple[str, int, float]]:
    """In event-time order with a little jitter; then one far-future reading per sensor."""
    rng = random.Random(seed)
    rows = [
        (SENSORS[i % len(SENSORS)], BASE_MS + i * 5 + rng.randint(0, 300), rng.uniform(10, 90))
        for i in range(count)
    ]
    return rows + [(s, BASE_MS + count * 5 + 600_000, 0.0) for s in SENSORS]


def pod(settings: Settings, tmp_path: Path, ordinal: int) -> WorkerProcess:
    """Like eddy-worker-<ordinal>: EDDY_WORKER_ID from the pod name, its own volume."""
    name = f"eddy-worker-{ordinal}"
    return WorkerProcess(
        settings,
        tmp_path / f"{name}.log",
        EDDY_WORKER_ID=name,
        EDDY_STATE_DIR=str(tmp_path / "volumes" / name),
    )


def metric(worker: WorkerProcess, name: str) -> float:
    lines = worker.get("/metrics").text.splitlines()
    return sum(float(line.split()[-1]) for line in lines if line.startswith(name))


def pipeline_status(worker: WorkerProcess) -> dict[str, Any]:
    status: dict[str, Any] = worker.status()["stages"][STAGE]
    return status


async def settle(workers: list[WorkerProcess], total: int, timeout_s: float = 90) -> None:
    """Every partition owned by exactly one ready worker, every record processed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, KeyError):
            statuses = [pipeline_status(w) for w in workers]
            owned = sorted(p for s in statuses for p in s["partitions"])
            done = sum(int(s["records_in"]) for s in statuses)
            if owned == list(range(6)) and all(s["ready"] for s in statuses) and done >= total:
                return
        await asyncio.sleep(0.3)
    raise AssertionError("the workers did not settle:\n" + "\n".join(w.log() for w in workers))


async def changelog_sizes(settings: Settings) -> dict[int, int]:
    """Records per partition of the pipeline's changelog: what a full restore reads."""
    topic = changelog_topic(settings, STAGE)
    consumer = AIOKafkaConsumer(**connection_kwargs(settings), group_id=None)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(settings.partitions)]
        ends = await consumer.end_offsets(partitions)
        begins = await consumer.beginning_offsets(partitions)
        return {tp.partition: ends[tp] - begins[tp] for tp in partitions}
    finally:
        await consumer.stop()


async def quiet_changelog(settings: Settings, above: int) -> dict[int, int]:
    """Waits until the changelog grew past ``above`` records and stopped growing."""
    last: dict[int, int] = {}
    for _ in range(120):
        sizes = await changelog_sizes(settings)
        if sizes == last and sum(sizes.values()) > above:
            return sizes
        last = sizes
        await asyncio.sleep(1.5)
    raise AssertionError(f"the changelog did not settle: {last}")


@dataclass
class Prober:
    """Asks the surviving workers for random sensors' windows, ten times a second."""

    workers: list[WorkerProcess]
    answers: list[tuple[float, int]] = field(default_factory=list)  # (monotonic s, status)
    wrong: list[str] = field(default_factory=list)

    def ok_between(self, start: float, end: float) -> int:
        return sum(1 for at, status in self.answers if start <= at <= end and status == 200)

    async def run(self, stop: asyncio.Event) -> None:
        rng = random.Random(1)
        async with httpx.AsyncClient(timeout=5.0) as client:
            while not stop.is_set():
                worker = rng.choice(self.workers)
                sensor = rng.choice(SENSORS)
                try:
                    response = await client.get(f"{worker.base}/sensors/{sensor}/windows")
                except httpx.HTTPError as exc:
                    self.wrong.append(f"{worker.base}: {exc!r}")
                else:
                    self.answers.append((time.monotonic(), response.status_code))
                    moving = response.status_code == 503 and "retry-after" in response.headers
                    if response.status_code != 200 and not moving:
                        self.wrong.append(f"{response.status_code}: {response.text[:200]}")
                await asyncio.sleep(0.1)


async def test_a_killed_pod_comes_back_on_its_volume_without_a_full_restore(
    tmp_path: Path,
) -> None:
    # As in deploy/k8s (EDDY_SESSION_TIMEOUT_MS, Kafka's default): longer than a
    # killed container takes to be restarted by the kubelet, so the pod rejoins
    # before the others take its partitions over, and gets them back.
    # No standbys: the pod's own volume is then the only warm copy of its partitions,
    # so what it restores shows what the volume saved (test_scaling covers standbys).
    settings = unique_settings(
        tmp_path, partitions=6, num_standby_replicas=0, session_timeout_ms=45_000
    )
    data = readings(30_000, seed=11)
    body, closing = data[: -len(SENSORS)], data[-len(SENSORS) :]
    first, during = body[:27_000], body[27_000:]
    await create_topics(settings)
    pods = [pod(settings, tmp_path, n) for n in range(3)]
    restarted: WorkerProcess | None = None
    try:
        for worker in pods:
            await asyncio.to_thread(worker.wait_ready)
        await produce(settings, readings_topic(settings), encoded(first))
        await settle(pods, len(first))
        before = await quiet_changelog(settings, 0)
        survivors = [pods[0], pods[2]]
        owned_before = pipeline_status(pods[1])["partitions"]
        prober = Prober(survivors)
        stop = asyncio.Event()
        probing = asyncio.create_task(prober.run(stop))
        await asyncio.sleep(1)

        # The container is killed (no commit, no leaving the group) and the kubelet
        # starts it again in the same pod: same name, same volume, seconds later.
        killed_at = time.monotonic()
        await asyncio.to_thread(pods[1].stop, signal.SIGKILL)
        await produce(settings, readings_topic(settings), encoded(during))
        restarted = pod(settings, tmp_path, 1)
        await asyncio.to_thread(restarted.wait_ready)
        back_at = time.monotonic()
        await settle([pods[0], restarted, pods[2]], 0)
        after = await quiet_changelog(settings, sum(before.values()))
        await asyncio.sleep(1)
        stop.set()
        await probing

        back = pipeline_status(restarted)["partitions"]
        assert back == owned_before, "the pod did not get its own partitions back"
        restored = metric(restarted, "eddy_restored_records_total")
        full = sum(after[p] for p in back)
        # It resumed from its own RocksDB: a full restore would read `full` records.
        assert restored < 0.2 * full, (back, restored, after)
        # The survivors answered throughout: 200 for their keys, 503 with
        # Retry-After for keys whose partition was moving (never an error).
        assert not prober.wrong, prober.wrong[:5]
        assert len(prober.answers) > 50, "the probe hardly ran"
        assert prober.ok_between(killed_at, back_at) > 0, "no answers while the pod was down"
        assert prober.ok_between(back_at, time.monotonic()) > 0
        # And any pod answers any key again, the restarted one included (forwarding).
        await produce(settings, readings_topic(settings), encoded(closing))
        for worker in (pods[0], restarted, pods[2]):
            for sensor in SENSORS:
                assert worker.get(f"/sensors/{sensor}/windows").status_code == 200
    finally:
        for worker in (*pods, restarted):  # a stopped or killed one is skipped
            if worker is not None:
                worker.stop()
