"""Snapshots of a worker's state while it ingests: the exported rows are the state
at the manifest's offsets (rebuilt from the changelog and, independently, from the
input), and they equal what the REST API answers."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pyarrow.parquet as pq
import pytest
from aiokafka import AIOKafkaProducer

from eddy.client import request_snapshot
from eddy.settings import Settings
from eddy.snapshot.layout import SnapshotRoot
from eddy.tables.export import decoder_for
from eddy.topics import TopicSpec, changelog_topic, ensure_topics
from eddy.worker import Worker
from tests.support.kafka import read_all, readings_topic, unique_settings, wait_until

pytestmark = pytest.mark.integration

BASE = (time.time_ns() // 3_600_000_000_000 - 1) * 3_600_000
SENSORS = [f"s{n}" for n in range(8)]
PIPELINES = ("sensor_averages", "sensor_alerts")
WINDOW_MS, BOUND_MS = 5_000, 1_000


def reading(tick: int, sensor: int) -> dict[str, Any]:
    # Every seventh reading freezes, so sensor_alerts has state too.
    temperature = 20.0 if (tick + sensor) % 7 == 0 else 40.0 + (tick * 3 + sensor) % 11
    return {
        "sensor_id": SENSORS[sensor],
        "timestamp_ms": BASE + tick * 50,
        "temperature": temperature,
    }


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[Settings, Worker]]:
    settings = unique_settings(
        tmp_path, agents=PIPELINES, snapshot_root=str(tmp_path / "snapshots")
    )
    await ensure_topics(settings, [TopicSpec(readings_topic(settings), 3)])
    worker = Worker(settings)
    await worker.start()
    try:
        await wait_until(lambda: worker.readiness()[0], timeout_s=90)
        yield settings, worker
    finally:
        await worker.stop()


async def ingest(settings: Settings, stop: asyncio.Event) -> int:
    """Readings in event-time order, in small batches, until told to stop."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers, linger_ms=5)
    await producer.start()
    tick = sent = 0
    try:
        while not stop.is_set():
            futures = []
            for _ in range(10):
                for sensor in range(len(SENSORS)):
                    row = reading(tick, sensor)
                    value, key = orjson.dumps(row), row["sensor_id"].encode()
                    futures.append(await producer.send(readings_topic(settings), value, key=key))
                tick += 1
            await asyncio.gather(*futures)
            sent += len(futures)
            await asyncio.sleep(0.02)
        # Readings 10 s ahead: the windows of everything sent before close.
        futures = []
        for sensor in range(len(SENSORS)):
            row = reading(tick + 200, sensor)
            value, key = orjson.dumps(row), row["sensor_id"].encode()
            futures.append(await producer.send(readings_topic(settings), value, key=key))
        await asyncio.gather(*futures)
        sent += len(futures)
    finally:
        await producer.stop()
    return sent


def exported(root: SnapshotRoot, manifest: dict[str, Any], pipeline: str) -> dict[int, set[Any]]:
    """Every exported row of ``pipeline``, per partition, as comparable tuples."""
    rows: dict[int, set[Any]] = defaultdict(set)
    base = root.snapshot_dir(manifest["app_id"], manifest["snapshot_id"])
    for part in manifest["parts"]:
        if part["pipeline"] != pipeline:
            continue
        for table, info in part["tables"].items():
            for file in info["files"]:
                for r in pq.read_table(f"{base}/{file}").to_pylist():
                    rows[part["partition"]].add(
                        (
                            table,
                            r["raw_key"],
                            r["key"],
                            r["window_start_ms"],
                            r["window_end_ms"],
                            r["value"],
                        )
                    )
    return rows


async def state_from_changelog(
    settings: Settings, pipeline: str, offsets: dict[int, int]
) -> dict[int, set[Any]]:
    """Each partition's state rebuilt from its changelog up to ``offsets``."""
    records = await read_all(settings, changelog_topic(settings, pipeline), quiet_s=1.0)
    state: dict[int, dict[bytes, bytes]] = defaultdict(dict)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        if record.offset > offsets[record.partition]:
            continue
        if record.value is None:
            state[record.partition].pop(record.key, None)
        else:
            state[record.partition][record.key] = record.value
    rows: dict[int, set[Any]] = defaultdict(set)
    for partition, entries in state.items():
        for full_key, value in entries.items():
            table = full_key[1 : 1 + full_key[0]].decode()
            raw_key = full_key[1 + full_key[0] :]
            key, start, end, text = decoder_for(table)(raw_key, value)
            rows[partition].add((table, raw_key, key.decode(), start, end, text and text.decode()))
    return rows


async def test_a_snapshot_taken_while_ingesting_is_the_state_at_its_offsets(
    running: tuple[Settings, Worker],
) -> None:
    settings, worker = running
    stop = asyncio.Event()
    producing = asyncio.create_task(ingest(settings, stop))
    await asyncio.sleep(3.0)
    url = f"http://127.0.0.1:{worker.api_port}"
    answer = await asyncio.to_thread(request_snapshot, url, settings)
    await asyncio.sleep(0.5)
    stop.set()
    sent = await producing
    assert answer["complete"], answer
    root = SnapshotRoot.open(settings.snapshot_root)
    manifest = root.manifest(settings.app_id)
    assert manifest["snapshot_id"] == answer["id"]
    assert manifest["pipelines"] == {"sensor_alerts": 3, "sensor_averages": 3}
    parts = {(p["pipeline"], p["partition"]): p for p in manifest["parts"]}
    taken = sum(
        p["committed_offsets"][readings_topic(settings)]
        for k, p in parts.items()
        if k[0] == "sensor_averages"
    )
    assert 0 < taken < sent  # cut in the middle of the ingestion

    # 1. The exported rows are exactly the changelog up to the manifest's offsets.
    for pipeline in PIPELINES:
        offsets = {p: parts[(pipeline, p)]["changelog_offset"] for p in range(3)}
        assert exported(root, manifest, pipeline) == await state_from_changelog(
            settings, pipeline, offsets
        )

    # 2. Independently, from the input: the windows closed by the readings before
    # each partition's committed offset, and the watermark they imply.
    inputs = await read_all(settings, readings_topic(settings), min_records=sent, quiet_s=0.5)
    readings: dict[tuple[str, int], list[float]] = defaultdict(list)
    for partition in range(3):
        part = parts[("sensor_averages", partition)]
        before = [
            orjson.loads(r.value)
            for r in inputs
            if r.partition == partition
            and r.offset < part["committed_offsets"][readings_topic(settings)]
        ]
        watermark = max(r["timestamp_ms"] for r in before) - BOUND_MS - 1
        assert part["watermark_ms"] == watermark
        for r in before:
            start = r["timestamp_ms"] // WINDOW_MS * WINDOW_MS
            if start + WINDOW_MS - 1 <= watermark:
                readings[(r["sensor_id"], start)].append(r["temperature"])
    results = {
        (row[2], row[3]): orjson.loads(row[5])
        for rows in exported(root, manifest, "sensor_averages").values()
        for row in rows
        if row[0] == "results"
    }
    assert set(results) == set(readings)
    for key, temps in readings.items():
        got = results[key]
        assert (got["count"], got["min"], got["max"]) == (len(temps), min(temps), max(temps))
        assert got["avg"] == pytest.approx(sum(temps) / len(temps))

    # 3. Closed windows never change: REST answers the exported results.
    async with httpx.AsyncClient(base_url=url) as client:
        for sensor in SENSORS:
            page = (await client.get(f"/sensors/{sensor}/windows", params={"limit": 1000})).json()
            served = {w["window_start_ms"]: w for w in page["windows"]}
            for (key, start), value in results.items():
                if key == sensor:  # REST leaves out the key it was asked for
                    assert served[start] == {**value, "sensor_id": sensor} or served[start] == {
                        k: v for k, v in value.items() if k != "sensor_id"
                    }


async def test_a_quiet_snapshot_equals_every_rest_answer(running: tuple[Settings, Worker]) -> None:
    settings, worker = running
    stop = asyncio.Event()
    producing = asyncio.create_task(ingest(settings, stop))
    await asyncio.sleep(1.0)
    stop.set()
    sent = await producing

    def caught_up() -> bool:
        runtime = worker.runtimes["sensor_alerts"]
        done = sum(o for t in runtime.tasks.values() for o in t.committed_offsets.values())
        return done == sent and all(
            sum(o for t in rt.tasks.values() for o in t.committed_offsets.values()) == sent
            for rt in worker.runtimes.values()
        )

    await wait_until(caught_up, timeout_s=60)
    await asyncio.sleep(2.0)  # the last "rising" timers (1 s of processing time) fire
    url = f"http://127.0.0.1:{worker.api_port}"
    answer = await asyncio.to_thread(request_snapshot, url, settings)
    assert answer["complete"]
    root = SnapshotRoot.open(settings.snapshot_root)
    manifest = root.manifest(settings.app_id, answer["id"])
    alerts = {
        row[2]: orjson.loads(row[5])
        for rows in exported(root, manifest, "sensor_alerts").values()
        for row in rows
        if row[0] == "state.recent"
    }
    windows: dict[str, dict[int, Any]] = defaultdict(dict)
    for rows in exported(root, manifest, "sensor_averages").values():
        for row in rows:
            if row[0] == "results":
                windows[row[2]][row[3]] = orjson.loads(row[5])
    assert set(alerts) == set(windows) == set(SENSORS)
    async with httpx.AsyncClient(base_url=url) as client:
        for sensor in SENSORS:
            rest = (await client.get(f"/sensors/{sensor}/alerts")).json()
            assert rest["value"] == alerts[sensor]
            page = (await client.get(f"/sensors/{sensor}/windows", params={"limit": 1000})).json()
            assert {w["window_start_ms"]: w for w in page["windows"]} == windows[sensor]


async def test_two_workers_make_one_snapshot_from_one_request(tmp_path: Path) -> None:
    settings = unique_settings(
        tmp_path, agents=("sensor_averages",), snapshot_root=str(tmp_path / "snapshots")
    )
    await ensure_topics(settings, [TopicSpec(readings_topic(settings), 4)])
    a = Worker(settings)
    b = Worker(
        settings.model_copy(
            update={"state_dir": tmp_path / "state-b", "worker_id": f"{settings.worker_id}-b"}
        )
    )
    await a.start()
    await b.start()
    try:

        def split() -> bool:
            owned = [set(w.runtimes["sensor_averages"].tasks) for w in (a, b)]
            owners = {a.runtimes["sensor_averages"].owner_of(p) for p in range(4)}
            return all(owned) and len(owned[0] | owned[1]) == 4 and None not in owners

        await wait_until(split, timeout_s=90)
        stop = asyncio.Event()
        producing = asyncio.create_task(ingest(settings, stop))
        await asyncio.sleep(1.0)
        stop.set()
        await producing
        answer = await asyncio.to_thread(
            request_snapshot, f"http://127.0.0.1:{a.api_port}", settings
        )
        assert answer["complete"], answer
        manifest = SnapshotRoot.open(settings.snapshot_root).manifest(settings.app_id)
        assert [p["partition"] for p in manifest["parts"]] == [0, 1, 2, 3]
        assert {p["worker_id"] for p in manifest["parts"]} == {a.worker_id, b.worker_id}
        assert {w.get("worker_id") for w in answer["workers"]} == {a.worker_id, b.worker_id}
        parts = [(p["stage"], p["partition"]) for w in answer["workers"] for p in w["partitions"]]
        assert sorted(parts) == [("sensor_averages", p) for p in range(4)]
    finally:
        await b.stop()
        await a.stop()
