"""Queries while a worker cannot be reached by its peers: two ``eddy worker``
processes on the real broker split the partitions; the owner of a key stops
answering (its query process is stopped with SIGSTOP: its ingest process goes
on, so the group keeps its partitions, as when a link between workers is cut).
1,000 queries for its key through the other worker each answer 503 naming the
owner within 5 s, never a wrong value; once it answers again, so do queries."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from eddy.api.forward import DEADLINE_MS, RECENTLY_UNREACHABLE
from eddy.app.queries import partition_for
from tests.integration.test_routing import SENSORS, summary, windows_of
from tests.support.kafka import (
    create_topics,
    unique_settings,
    wait_until,
)
from tests.support.processes import WorkerProcess

pytestmark = pytest.mark.integration

STAGE = "sensor_averages"
QUERIES = 1_000
AT_ONCE = 50  # a busy dashboard's worth of queries in flight
CLIENT_PATIENCE_S = 5.0


def served(worker: WorkerProcess) -> set[int]:
    stage = worker.status()["stages"][STAGE]
    return set(stage["partitions"]) if stage["ready"] else set()


async def timed(client: httpx.AsyncClient, url: str) -> tuple[float, httpx.Response]:
    started = time.monotonic()
    answer = await client.get(url)
    return time.monotonic() - started, answer


async def test_queries_for_a_worker_its_peers_cannot_reach_answer_503_in_time(
    tmp_path: Path,
) -> None:
    began = time.monotonic()
    settings = unique_settings(tmp_path)
    await create_topics(settings)
    a, b = (
        WorkerProcess(
            settings,
            tmp_path / f"{name}.log",
            EDDY_STATE_DIR=str(tmp_path / name),
            EDDY_WORKER_ID=f"{settings.worker_id}-{name}",
        )
        for name in ("a", "b")
    )
    stopped = False
    try:
        a.wait_ready()
        b.wait_ready()
        await wait_until(
            lambda: len(served(a) | served(b)) == settings.partitions and served(a) and served(b),
            timeout_s=60,
        )
        ready_s = time.monotonic() - began
        want = await windows_of(settings, steps=100)
        sensor = next(s for s in SENSORS if partition_for(s, settings.partitions) in served(b))
        url = f"{a.base}/sensors/{sensor}/windows"
        async with httpx.AsyncClient(timeout=30) as client:
            answer = await client.get(url)
            assert answer.status_code == 200, answer.text
            assert answer.json()["freshness"]["served_by"] == f"{settings.worker_id}-b"
            assert summary(answer.json()["windows"]) == want[sensor]

            os.kill(b.process.pid, signal.SIGSTOP)
            stopped = True
            started = time.monotonic()
            gate = asyncio.Semaphore(AT_ONCE)

            async def one() -> tuple[float, httpx.Response]:
                async with gate:
                    return await timed(client, url)

            answers = await asyncio.gather(*(one() for _ in range(QUERIES)))
            total_s = time.monotonic() - started
            assert_each_is_a_timely_503(answers, b, partition_for(sensor, settings.partitions))

            os.kill(b.process.pid, signal.SIGCONT)
            stopped = False
            healed = time.monotonic()
            answer = await poll_until_200(client, url)
            heal_s = time.monotonic() - healed
            assert summary(answer.json()["windows"]) == want[sensor]  # 0 wrong values
            assert answer.json()["freshness"]["served_by"] == f"{settings.worker_id}-b"
        slowest_s = max(took for took, _ in answers)
        print(
            f"{QUERIES} queries ({AT_ONCE} at once) to a stopped owner: {total_s:.2f} s in all,"
            f" slowest {slowest_s:.2f} s; answered again {heal_s:.2f} s after SIGCONT;"
            f" workers split the partitions {ready_s:.1f} s after the start"
        )
        assert heal_s < CLIENT_PATIENCE_S
    finally:
        if stopped:
            os.kill(b.process.pid, signal.SIGCONT)
        a.stop()
        b.stop()


def assert_each_is_a_timely_503(
    answers: list[tuple[float, httpx.Response]], owner: WorkerProcess, partition: int
) -> None:
    reasons: dict[str, int] = {}
    for took_s, answer in answers:
        assert answer.status_code == 503, answer.text
        assert took_s < CLIENT_PATIENCE_S, f"{took_s:.2f} s: {answer.text}"
        assert answer.headers["content-type"] == "application/problem+json"
        assert int(answer.headers["retry-after"]) >= 1
        body: dict[str, Any] = answer.json()
        assert (body["owner"], body["partition"]) == (owner.base, partition)
        reasons[body["reason"]] = reasons.get(body["reason"], 0) + 1
    waited = f"no answer within {DEADLINE_MS / 1_000:g} s"
    # A few waited for the owner; the others were told at once.
    assert set(reasons) <= {waited, f"{RECENTLY_UNREACHABLE} ({waited})"}, reasons
    assert reasons.get(f"{RECENTLY_UNREACHABLE} ({waited})", 0) > len(answers) // 2, reasons


async def poll_until_200(client: httpx.AsyncClient, url: str) -> httpx.Response:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = await client.get(url)
        if answer.status_code == 200:
            return answer
        assert answer.status_code == 503, answer.text
        await asyncio.sleep(0.1)
    raise AssertionError(f"the owner is not asked again: {answer.text}")
