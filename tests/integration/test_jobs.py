"""The operations view on the real broker: ``GET /jobs`` over the worker's own
uvicorn server, ``python -m eddy status`` as a subprocess, latency markers in
/metrics, and one answer covering two workers, one of whose API is down."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from eddy.app.queries import partition_for
from eddy.client import request_snapshot
from eddy.settings import Settings
from eddy.topics import TopicSpec, ensure_topics
from eddy.worker import Worker
from tests.support.kafka import (
    produce,
    readings_topic,
    sensor_settings,
    unique_settings,
    wait_until,
)

pytestmark = pytest.mark.integration

BASE_MS = (time.time_ns() // 3_600_000_000_000 - 1) * 3_600_000
SENSORS = [f"sensor_{i}" for i in range(1, 13)]
PARTITIONS = 3
STAGE = "sensor_averages"
ROOT = Path(__file__).resolve().parents[2]


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    return unique_settings(
        tmp_path,
        partitions=PARTITIONS,
        latency_marker_interval_ms=100,
        snapshot_root=str(tmp_path / "snapshots"),
        savepoint_root=str(tmp_path / "savepoints"),
        **overrides,
    )


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[Settings, Worker]]:
    settings = make_settings(tmp_path)
    await ensure_topics(settings, [TopicSpec(readings_topic(settings), PARTITIONS)])
    worker = Worker(settings)
    await worker.start()
    try:
        await wait_until(lambda: worker.readiness()[0], timeout_s=90)
        yield settings, worker
    finally:
        await worker.stop()


async def produce_readings(settings: Settings, steps: int) -> dict[int, int]:
    """Readings of every sensor; returns each partition's newest timestamp."""
    rows = [
        {"sensor_id": sensor, "timestamp_ms": BASE_MS + step * 100, "temperature": 20.0 + step}
        for step in range(steps)
        for sensor in SENSORS
    ]
    await produce(
        settings,
        readings_topic(settings),
        [(r["sensor_id"].encode(), orjson.dumps(r)) for r in rows],
    )
    newest: dict[int, int] = {}
    for r in rows:
        p = partition_for(r["sensor_id"], PARTITIONS)
        newest[p] = max(newest.get(p, 0), r["timestamp_ms"])
    return newest


async def get_jobs(port: int | None, **params: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=30) as client:
        answer = await client.get(f"http://127.0.0.1:{port}/jobs", params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def rows_of(jobs: dict[str, Any]) -> dict[int, dict[str, Any]]:
    [stage] = [s for s in jobs["stages"] if s["stage"] == STAGE]
    assert stage["agent"] == STAGE  # the agent runs as this one stage
    return {row["partition"]: row for row in stage["partitions"]}


async def status_command(*args: str) -> tuple[int, str, str]:
    """``python -m eddy status`` in a subprocess (this loop keeps serving the API)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "eddy",
        "status",
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_jobs_and_status_show_every_partition_caught_up(
    running: tuple[Settings, Worker],
) -> None:
    settings, worker = running
    started_ms = int(time.time() * 1000)
    newest = await produce_readings(settings, steps=50)
    produced = 50 * len(SENSORS)

    async def caught_up() -> bool:
        rows = rows_of(await get_jobs(worker.api_port))
        return sum(
            r["committed_offsets"].get(readings_topic(settings), 0) for r in rows.values()
        ) == produced and all(r["lag"] == 0 and r["latency_ms"] is not None for r in rows.values())

    await wait_until(caught_up, timeout_s=60)
    url = f"http://127.0.0.1:{worker.api_port}"
    # In a thread: the worker serves the request in this event loop.
    snapshot = await asyncio.to_thread(request_snapshot, url, settings)
    assert snapshot["complete"]

    jobs = await get_jobs(worker.api_port)
    assert jobs["app_id"] == settings.app_id
    assert jobs["complete"] is True
    rows = rows_of(jobs)
    assert sorted(rows) == list(range(PARTITIONS))
    for partition, row in rows.items():
        assert row["state"] == "running"
        assert row["owner"] == {"worker_id": settings.worker_id, "endpoint": worker.endpoint}
        assert (
            row["end_offsets"][readings_topic(settings)]
            == row["committed_offsets"][readings_topic(settings)]
        )
        # The watermark of bounded out-of-orderness: newest timestamp - bound - 1.
        assert row["watermark_ms"] == newest[partition] - sensor_settings().watermark_bound_ms - 1
        assert started_ms <= row["last_commit_ms"] <= int(time.time() * 1000)
        assert 0 <= row["latency_ms"] < 30_000
        assert row["records_in"] > 0
    assert jobs["last_snapshot"]["id"] == snapshot["id"]
    assert jobs["last_savepoint"] is None

    async with httpx.AsyncClient(timeout=30) as client:
        metrics = (await client.get(f"http://127.0.0.1:{worker.api_port}/metrics")).text
    counts = {
        sample.labels["partition"]: sample.value
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == "eddy_latency_marker_seconds_count"
        and sample.labels["stage"] == STAGE
        and sample.labels["source"] == readings_topic(settings)
    }
    assert sorted(counts) == [str(p) for p in range(PARTITIONS)], metrics[:2_000]
    assert all(count > 0 for count in counts.values())

    code, out, err = await status_command("--url", url)
    assert code == 0, err
    for partition in range(PARTITIONS):
        # agent │ stage │ partition │ owner ...
        line = re.search(rf"{STAGE}\s*│\s*{STAGE}\s*│\s*{partition}\s*│([^\n]*)", out)
        assert line is not None, out
        assert settings.worker_id in line.group(1)
        assert "running" in line.group(1)
    assert f"last snapshot: {snapshot['id']}" in out
    assert "last savepoint: none" in out

    code, out, err = await status_command("--url", url, "--json")
    assert code == 0, err
    assert sorted(rows_of(json.loads(out))) == list(range(PARTITIONS))

    dead = f"http://127.0.0.1:{closed_port()}"
    code, out, err = await status_command("--url", dead)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert dead in err
    assert "EDDY_API_PORT" in err
    assert "Traceback" not in err


async def test_one_worker_answers_for_both_and_a_silent_peer_is_unreachable(
    tmp_path: Path,
) -> None:
    settings = make_settings(tmp_path)
    settings_b = settings.model_copy(
        update={"state_dir": tmp_path / "state-b", "worker_id": f"{settings.worker_id}-b"}
    )
    await ensure_topics(settings, [TopicSpec(readings_topic(settings), PARTITIONS)])
    a, b = Worker(settings), Worker(settings_b)
    await a.start()
    await b.start()
    try:

        def split() -> bool:
            mine, theirs = (set(w.runtimes[STAGE].tasks) for w in (a, b))
            return bool(mine) and bool(theirs) and len(mine | theirs) == PARTITIONS

        await wait_until(split, timeout_s=90)
        await wait_until(lambda: a.readiness()[0] and b.readiness()[0], timeout_s=90)
        await produce_readings(settings, steps=20)
        b_partitions = set(b.runtimes[STAGE].tasks)

        async def both_report() -> bool:
            rows = rows_of(await get_jobs(a.api_port))
            return all(r["state"] == "running" and r["lag"] == 0 for r in rows.values())

        await wait_until(both_report, timeout_s=60)
        jobs = await get_jobs(a.api_port)
        owners = {p: r["owner"]["worker_id"] for p, r in rows_of(jobs).items()}
        assert {p for p, w in owners.items() if w == b.worker_id} == b_partitions
        assert {p for p, w in owners.items() if w == a.worker_id} == set(range(3)) - b_partitions
        assert {w["worker_id"] for w in jobs["workers"]} == {a.worker_id, b.worker_id}

        # B's API goes silent while B stays in the group (a hung or firewalled
        # worker): its partitions keep their owner, shown as unreachable.
        assert b._server is not None
        b._server.should_exit = True
        await wait_until(lambda: b._tasks[0].done(), timeout_s=30)
        jobs = await get_jobs(a.api_port)
        rows = rows_of(jobs)
        assert sorted(rows) == list(range(PARTITIONS))
        for partition, row in rows.items():
            if partition in b_partitions:
                assert row["state"] == "unreachable"
                assert row["owner"]["endpoint"] == b.endpoint
                assert b.endpoint in row["error"]
            else:
                assert row["state"] == "running"
        assert jobs["complete"] is False
        silent = [w for w in jobs["workers"] if not w["reachable"]]
        assert [w["endpoint"] for w in silent] == [b.endpoint]
    finally:
        await a.stop()
        await b.stop()
