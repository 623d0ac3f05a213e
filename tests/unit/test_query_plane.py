"""The query process of ``eddy worker`` without a broker: real RocksDB stores written
as an ingest process writes them, the reports an ingest process publishes, and the
API answering from them through secondary instances (routes, freshness, 503 while
restoring, forwarding, readiness, metrics, the app's own routes)."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from httpx import ASGITransport, AsyncClient

import agents
from api.app import create_app
from service.app.queries import PartitionUnavailableError, partition_for
from service.eventtime import SystemClock, TimeWindow
from service.metrics import Metrics
from service.pipeline.windowed import RESULTS
from service.plane.backend import QueryPlane
from service.plane.stages import LocalStage, Secondaries
from service.plane.status import ReportFile
from service.plane.supervisor import Child
from service.settings import Settings, build
from tables.store import PartitionStore
from tests.support.kafka import TEST_AGENT_SETTINGS

PARTITIONS = 6
ME = "http://me:8000"
PEER = "http://peer:8000"
STAGE = "sensor_averages"


def sensor_in(partition: int) -> str:
    return next(f"s{i}" for i in range(1_000) if partition_for(f"s{i}", PARTITIONS) == partition)


def average(sensor: str, start_ms: int, count: int = 4) -> dict[str, Any]:
    return {
        "sensor_id": sensor,
        "window_start_ms": start_ms,
        "window_end_ms": start_ms + 5_000,
        "count": count,
        "avg": 70.0,
        "min": 69.0,
        "max": 71.0,
        "timing": "first",
    }


def commit(store: PartitionStore, sensor: str, starts: list[int], offset: int) -> None:
    """One checkpoint, as an ingest process writes it after the Kafka commit."""
    txn = store.begin()
    for start in starts:
        txn.put(RESULTS, (sensor, TimeWindow(start, start + 5_000)), average(sensor, start))
    txn.commit(txn.changelog_records(), offset)


@dataclass
class FakeProcess:
    pid: int
    returncode: int | None = None


class Host:
    """Two ingest processes' reports and stores, written by hand."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.status = root / "status"
        self.status.mkdir(parents=True)
        self.children = [
            Child(i, ReportFile(self.status / f"{i}.json"), self.status / f"{i}.prom")
            for i in range(2)
        ]
        for i, child in enumerate(self.children):
            child.process = FakeProcess(1_000 + i)  # type: ignore[assignment]
        self.stores: dict[int, PartitionStore] = {}
        # Process 0 serves 0-2, process 1 serves 3 and restores 4; 5 is the peer's.
        self.owned = {0: [0, 1, 2], 1: [3, 4]}
        self.restoring = {4}
        self.epochs: dict[int, int] = {}
        self.offsets: dict[int, int] = {}  # input offsets reported, by partition
        for partition in (0, 1, 2, 3):
            self.stores[partition] = PartitionStore(root / "state" / str(partition))
        self.ready = True

    def path(self, partition: int) -> str:
        return str(self.root / "state" / str(partition))

    def publish(self) -> None:
        owners = {str(p): ME for p in range(5)} | {"5": PEER}
        for index, partitions in self.owned.items():
            report = {
                "pid": 1_000 + index,
                "worker_id": f"w-p{index}",
                "control_url": None,
                "started": True,
                "ready": self.ready and not (set(partitions) & self.restoring),
                "live": True,
                "written_ms": int(time.time() * 1000),
                "stages": {
                    STAGE: {
                        "agent": STAGE,
                        "partition_count": PARTITIONS,
                        "assigned_once": True,
                        "ready": not (set(partitions) & self.restoring),
                        "partitions": {str(p): self._partition(p) for p in partitions},
                        "owners": owners,
                        "counters": {"records_in": 10.0 * (index + 1), "commits": 2.0},
                    }
                },
            }
            scratch = self.status / f".{index}.json.tmp"
            scratch.write_bytes(orjson.dumps(report))
            os.replace(scratch, self.status / f"{index}.json")

    def _partition(self, partition: int) -> dict[str, Any]:
        if partition in self.restoring:
            return {"state": "restoring", "epoch": 0, "path": "", "watermark_ms": None,
                    "committed_offsets": {}}  # fmt: skip
        return {
            "state": "running",
            "epoch": self.epochs.get(partition, 1),
            "path": self.path(partition),
            "watermark_ms": 9_999,
            "committed_offsets": {"sensor-readings": self.offsets.get(partition, 7 + partition)},
        }

    def close(self) -> None:
        for store in self.stores.values():
            store.close()


@pytest.fixture
def host(tmp_path: Path) -> Any:
    found = Host(tmp_path)
    found.publish()
    yield found
    found.close()


@pytest.fixture
def plane(host: Host, tmp_path: Path) -> Any:
    settings = build(Settings, {"topic_prefix": "", "worker_id": "w", "state_dir": tmp_path})
    names = [*agents.app.default_agents]
    built = agents.app.build(settings, names, TEST_AGENT_SETTINGS)
    secondaries = Secondaries(tmp_path / "secondary")
    found = QueryPlane(
        settings, built, SystemClock(), lambda: host.children, secondaries, lambda: ME
    )
    yield found
    secondaries.close()


@pytest.fixture
async def client(plane: QueryPlane) -> AsyncIterator[AsyncClient]:
    api = create_app(plane, None, plane.observe_request, app=agents.app)
    transport = ASGITransport(api, raise_app_exceptions=False)
    async with AsyncClient(transport=transport, base_url="http://eddy") as found:
        yield found


async def test_a_key_is_answered_from_its_processs_committed_store(
    host: Host, client: AsyncClient
) -> None:
    sensor = sensor_in(3)  # served by process 1
    commit(host.stores[3], sensor, [0, 5_000], 41)
    answer = await client.get(f"/agents/sensor_averages/windows/{sensor}")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [w["window_start_ms"] for w in body["windows"]] == [0, 5_000]
    assert body["freshness"] == {
        "served_by": "w",
        "partition": 3,
        "watermark_ms": 9_999,
        "committed_offsets": {"sensor-readings": 10},
    }
    # The next checkpoint is answered once its process reports it (a report follows
    # each checkpoint): the secondary catches up then, not on every query.
    commit(host.stores[3], sensor, [10_000], 42)
    before = (await client.get(f"/sensors/{sensor}/windows")).json()
    assert [w["window_start_ms"] for w in before["windows"]] == [0, 5_000]
    host.publish()
    again = (await client.get(f"/sensors/{sensor}/windows")).json()
    assert [w["window_start_ms"] for w in again["windows"]] == [0, 5_000, 10_000]


async def test_an_apps_own_route_reads_through_the_query_plane(
    host: Host, client: AsyncClient
) -> None:
    sensor = sensor_in(1)
    commit(host.stores[1], sensor, [0, 5_000, 10_000], 3)
    summary = (await client.get(f"/sensors/{sensor}")).json()
    assert summary["rolling_minute"]["windows"] == 3
    assert summary["rolling_minute"]["readings"] == 12


async def test_a_restoring_partition_is_503_with_retry_after(client: AsyncClient) -> None:
    answer = await client.get(f"/sensors/{sensor_in(4)}/windows")
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "2"
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["partition"] == 4


async def test_a_key_another_worker_owns_is_forwarded_there(
    plane: QueryPlane, client: AsyncClient
) -> None:
    asked: list[str] = []

    def peer(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(200, json={"from": "peer"})

    api = client._transport.app  # type: ignore[attr-defined]
    api.state.forward_client = httpx.AsyncClient(transport=httpx.MockTransport(peer))
    sensor = sensor_in(5)
    answer = await client.get(f"/sensors/{sensor}/windows")
    assert answer.json() == {"from": "peer"}
    assert asked == [f"{PEER}/sensors/{sensor}/windows"]
    await api.state.forward_client.aclose()


async def test_a_partition_reopened_while_it_was_read_is_not_answered(
    host: Host, plane: QueryPlane, tmp_path: Path
) -> None:
    """Its process may be rewriting the store (a restore): what was read is dropped."""
    sensor = sensor_in(2)
    commit(host.stores[2], sensor, [0], 5)
    reports = [(c.report, c.report.identity(), c.report.current()) for c in host.children]
    stage = LocalStage(STAGE, reports, Secondaries(tmp_path / "other"), ME)  # type: ignore[arg-type]
    served = stage.serve(2)
    assert served is not None
    served.confirm()  # nothing changed: fine
    host.epochs[2] = 2  # closed and opened again since
    host.publish()
    with pytest.raises(PartitionUnavailableError):
        served.confirm()


async def test_a_dead_process_serves_nothing(host: Host, client: AsyncClient) -> None:
    sensor = sensor_in(0)
    commit(host.stores[0], sensor, [0], 1)
    assert (await client.get(f"/sensors/{sensor}/windows")).status_code == 200
    host.children[0].process.returncode = -9  # type: ignore[union-attr]
    answer = await client.get(f"/sensors/{sensor}/windows")
    # The group still names this worker as the owner: no owner yet, retry.
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "1"


async def test_ready_when_every_process_is(host: Host, client: AsyncClient) -> None:
    answer = await client.get("/readyz")
    assert answer.status_code == 503  # process 1 restores partition 4
    stage = answer.json()["stages"][STAGE]
    assert (stage["partitions"], stage["restoring"]) == ([0, 1, 2, 3], [4])
    host.restoring.clear()
    host.owned[1] = [3]
    host.publish()
    assert (await client.get("/readyz")).status_code == 200


async def test_status_and_metrics_add_up_the_processes(host: Host, client: AsyncClient) -> None:
    for index, count in enumerate((3, 4)):
        metrics = Metrics()
        metrics.records_in.labels(STAGE).inc(count)
        metrics.assigned_partitions.labels(STAGE).set(len(host.owned[index]))
        from prometheus_client import generate_latest

        host.children[index].metrics_path.write_bytes(generate_latest(metrics.registry))
    commit(host.stores[0], sensor_in(0), [0], 1)
    host.publish()
    assert (await client.get(f"/sensors/{sensor_in(0)}/windows")).status_code == 200
    await client.get("/no/such/route")
    text = (await client.get("/metrics")).text
    assert f'eddy_records_in_total{{stage="{STAGE}"}} 7.0' in text
    # Requests are timed per route template and status, whatever the key.
    timed = 'eddy_http_request_seconds_count{method="GET",route="%s",status="%s"} 1.0'
    assert timed % ("/sensors/{key}/windows", 200) in text, text
    assert timed % ("unmatched", 404) in text, text
    assert f'eddy_assigned_partitions{{stage="{STAGE}"}} 5.0' in text
    assert "eddy_http_request_seconds" in text  # the query process's own
    status = (await client.get("/status")).json()["stages"][STAGE]
    assert status["records_in"] == 30.0
    assert status["partitions"] == [0, 1, 2, 3]
    assert status["watermarks_ms"] == dict.fromkeys(["0", "1", "2", "3"], 9_999)


async def test_a_store_is_followed_at_most_once_per_catch_up_interval(
    host: Host, tmp_path: Path
) -> None:
    """Within the interval a new checkpoint is not read yet, and the answer's
    freshness names the checkpoint that was read, not the newest one reported."""
    now_s = [100.0]
    settings = build(Settings, {"topic_prefix": "", "worker_id": "w", "state_dir": tmp_path})
    built = agents.app.build(settings, [*agents.app.default_agents], TEST_AGENT_SETTINGS)
    secondaries = Secondaries(tmp_path / "throttled", 200, clock=lambda: now_s[0])
    plane = QueryPlane(
        settings, built, SystemClock(), lambda: host.children, secondaries, lambda: ME
    )
    api = create_app(plane, None, plane.observe_request, app=agents.app)
    sensor = sensor_in(0)
    commit(host.stores[0], sensor, [0], 41)
    host.publish()
    async with AsyncClient(transport=ASGITransport(api), base_url="http://eddy") as client:

        async def starts_and_offset() -> tuple[list[int], int]:
            body = (await client.get(f"/sensors/{sensor}/windows")).json()
            starts = [w["window_start_ms"] for w in body["windows"]]
            return starts, body["freshness"]["committed_offsets"]["sensor-readings"]

        assert await starts_and_offset() == ([0], 7)
        commit(host.stores[0], sensor, [5_000], 42)
        host.offsets[0] = 8
        host.publish()
        now_s[0] += 0.150
        assert await starts_and_offset() == ([0], 7)  # 150 ms: not followed yet
        now_s[0] += 0.050
        assert await starts_and_offset() == ([0, 5_000], 8)  # 200 ms: followed
    secondaries.close()
