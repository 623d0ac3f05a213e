"""The operations view without a broker: this worker's partitions from fake
runtimes, peers' parts over a mock HTTP transport, the merge, and GET /jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx import ASGITransport, AsyncClient

from eddy.api.app import create_app
from eddy.eventtime import FakeClock
from eddy.jobs import JobsView, merge, partition_row
from eddy.runtime.latency import LatencyMarkers
from eddy.runtime.progress import InputProgress
from eddy.snapshot.layout import SnapshotRoot
from tests.support.kafka import unique_settings

ME, PEER, DOWN = "http://me:8000", "http://peer:8000", "http://down:8000"
NOW_MS = 1_800_000_000_000


@dataclass
class FakeLogic:
    watermark_ms: int


@dataclass
class FakeTask:
    logic: FakeLogic
    records_in: int = 0
    records_out: int = 0


@dataclass
class FakePipeline:
    sources: tuple[str, ...] = ("readings",)


@dataclass
class FakeRuntime:
    """What the view reads of a PipelineRuntime."""

    owners: dict[int, str | None]
    tasks: dict[int, FakeTask] = field(default_factory=dict)
    restoring: set[int] = field(default_factory=set)
    pipeline: FakePipeline = field(default_factory=FakePipeline)
    last_commit_ms: dict[int, int] = field(default_factory=dict)
    markers: LatencyMarkers = field(default_factory=lambda: LatencyMarkers(1_000))

    @property
    def partition_count(self) -> int:
        return len(self.owners)

    def owner_of(self, partition: int) -> str | None:
        return self.owners[partition]

    async def inputs(self, partition: int) -> list[InputProgress]:
        return [InputProgress("readings", 100 + partition, 100 + partition + 7, 7)]


def peer_part(worker_id: str, partitions: list[int]) -> dict[str, Any]:
    """A peer's answer to GET /jobs?scope=local."""
    rows = []
    for p in partitions:
        row = partition_row(p, {"worker_id": worker_id, "endpoint": PEER}, "running")
        rows.append({**row, "lag": 0, "watermark_ms": NOW_MS - 2_000, "last_commit_ms": NOW_MS})
    return {
        "app_id": "eddy",
        "served_by": worker_id,
        "now_ms": NOW_MS,
        "complete": False,
        "workers": [{"worker_id": worker_id, "endpoint": PEER, "reachable": True, "error": None}],
        "stages": [
            {
                "stage": "sensor_averages",
                "agent": "sensor_averages",
                "inputs": ["readings"],
                "partition_count": 4,
                "partitions": rows,
            }
        ],
        "last_savepoint": None,
        "last_snapshot": None,
        "errors": [],
    }


@pytest.fixture
def runtime() -> FakeRuntime:
    """Partitions 0 (running) and 1 (restoring) here, 2 on PEER, 3 on a dead worker."""
    markers = LatencyMarkers(1_000)
    markers.note(("readings", 0), NOW_MS - 300)
    markers.observe(0, NOW_MS - 180)
    return FakeRuntime(
        owners={0: ME, 1: ME, 2: PEER, 3: DOWN},
        tasks={0: FakeTask(FakeLogic(NOW_MS - 1_500), records_in=40, records_out=3)},
        restoring={1},
        last_commit_ms={0: NOW_MS - 100},
        markers=markers,
    )


def view(tmp_path: Path, runtime: FakeRuntime, handler: Any, **settings: Any) -> JobsView:
    values = {
        "snapshot_root": str(tmp_path / "snapshots"),
        "savepoint_root": str(tmp_path / "savepoints"),
        **settings,
    }
    return JobsView(
        unique_settings(tmp_path, **values),
        lambda: {"sensor_averages": runtime},  # type: ignore[dict-item]
        FakeClock(NOW_MS),
        lambda: ME,
        transport=httpx.MockTransport(handler),
    )


def by_partition(answer: dict[str, Any]) -> dict[int, dict[str, Any]]:
    [stage] = answer["stages"]
    return {row["partition"]: row for row in stage["partitions"]}


async def test_one_answer_shows_every_partition_and_a_dead_peer_as_unreachable(
    tmp_path: Path, runtime: FakeRuntime
) -> None:
    asked: list[httpx.Request] = []

    def peers(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        if request.url.host == "down":
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json=peer_part("worker-b", [2]))

    jobs = view(tmp_path, runtime, peers, api_token="s3cret")
    answer = await jobs.answer("all")

    rows = by_partition(answer)
    assert sorted(rows) == [0, 1, 2, 3]
    mine = rows[0]
    assert mine["state"] == "running"
    assert mine["owner"]["endpoint"] == ME
    assert mine["owner"]["worker_id"] == jobs.settings.worker_id
    assert mine["committed_offsets"] == {"readings": 100}
    assert mine["end_offsets"] == {"readings": 107}
    assert mine["lag"] == 7
    assert mine["watermark_ms"] == NOW_MS - 1_500
    assert mine["last_commit_ms"] == NOW_MS - 100
    assert mine["latency_ms"] == 120.0
    assert (mine["records_in"], mine["records_out"]) == (40, 3)
    assert rows[1]["state"] == "restoring"
    assert rows[2]["state"] == "running"
    assert rows[2]["owner"]["worker_id"] == "worker-b"
    assert rows[3]["state"] == "unreachable"
    assert rows[3]["owner"] == {"worker_id": None, "endpoint": DOWN}
    assert DOWN in rows[3]["error"]
    assert "connection refused" in rows[3]["error"]
    assert answer["complete"] is False
    workers = {w["endpoint"]: w for w in answer["workers"]}
    assert workers[PEER]["reachable"]
    assert not workers[DOWN]["reachable"]
    # Peers are asked for their own part only, with the app's token.
    assert {r.url.params["scope"] for r in asked} == {"local"}
    assert {r.headers["authorization"] for r in asked} == {"Bearer s3cret"}
    assert answer["last_savepoint"] is None
    assert answer["last_snapshot"] is None


async def test_local_scope_asks_nobody(tmp_path: Path, runtime: FakeRuntime) -> None:
    def nobody(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"asked {request.url}")

    answer = await view(tmp_path, runtime, nobody).answer("local")
    assert sorted(by_partition(answer)) == [0, 1]


async def test_each_stage_says_which_agent_it_is_part_of(
    tmp_path: Path, runtime: FakeRuntime
) -> None:
    jobs = JobsView(
        unique_settings(tmp_path),
        lambda: {"hashtag_counts.repartition": runtime},  # type: ignore[dict-item]
        FakeClock(NOW_MS),
        lambda: ME,
        lambda stage: stage.removesuffix(".repartition"),
    )
    [stage] = (await jobs.answer("local"))["stages"]
    assert (stage["stage"], stage["agent"]) == ("hashtag_counts.repartition", "hashtag_counts")


async def test_the_newest_complete_savepoint_and_snapshot_are_shown(
    tmp_path: Path, runtime: FakeRuntime
) -> None:
    jobs = view(tmp_path, runtime, lambda r: httpx.Response(200, json=peer_part("b", [2, 3])))
    app_id = jobs.settings.app_id
    snapshots = SnapshotRoot.open(str(tmp_path / "snapshots"))
    for snapshot_id, created_ms in (("20270101T000000000Z", 1), ("20270102T000000000Z", 2)):
        manifest = {
            "snapshot_id": snapshot_id,
            "created_ms": created_ms,
            "app_id": app_id,
            "schema_version": 1,
            "completed_ms": created_ms,
            "complete": True,
            "pipelines": {},
            "rows": 0,
            "parts": [],
        }
        snapshots.write_json(
            f"{snapshots.snapshot_dir(app_id, snapshot_id)}/_manifest.json", manifest
        )
    # A savepoint still being written (no manifest) does not count.
    (tmp_path / "savepoints" / app_id / "20270103T000000000Z" / "_parts").mkdir(parents=True)

    answer = await jobs.answer("all")

    assert answer["last_snapshot"]["id"] == "20270102T000000000Z"
    assert answer["last_snapshot"]["created_ms"] == 2
    assert answer["last_snapshot"]["location"].endswith("20270102T000000000Z")
    assert answer["last_savepoint"] is None
    # DOWN's partition 3 was reported by PEER: taken from there (a rebalance behind).
    assert by_partition(answer)[3]["state"] == "running"
    assert answer["errors"] == []


def test_partitions_nobody_reports_are_unassigned_or_unreachable() -> None:
    local = peer_part("me", [0])
    local["workers"][0]["endpoint"] = ME
    answer = merge(
        local,
        {PEER: peer_part("b", []), DOWN: "answered 500: internal error"},
        {"sensor_averages": {0: ME, 1: PEER, 2: DOWN, 3: None}},
    )
    rows = by_partition(answer)
    assert [rows[p]["state"] for p in range(4)] == [
        "running",
        "unassigned",
        "unreachable",
        "unassigned",
    ]
    assert "does not report it" in rows[1]["error"]
    assert "answered 500" in rows[2]["error"]
    assert rows[3]["owner"] is None


class JobsBackend:
    worker_id = "w-test"

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.scopes: list[str] = []

    def views(self) -> list[Any]:
        return []

    async def jobs(self, scope: str) -> dict[str, Any]:
        self.scopes.append(scope)
        return self.answer


async def test_get_jobs_validates_scope_and_needs_the_token() -> None:
    answer = peer_part("w-test", [0, 1])
    backend = JobsBackend(answer)
    app = create_app(backend, "s3cret")  # type: ignore[arg-type]
    auth = {"Authorization": "Bearer s3cret"}
    async with AsyncClient(transport=ASGITransport(app), base_url="http://eddy") as client:
        ok = await client.get("/jobs", headers=auth)
        local = await client.get("/jobs", params={"scope": "local"}, headers=auth)
        bad = await client.get("/jobs", params={"scope": "everything"}, headers=auth)
        denied = await client.get("/jobs")
    assert ok.status_code == 200
    assert [r["partition"] for r in ok.json()["stages"][0]["partitions"]] == [0, 1]
    assert local.status_code == 200
    assert backend.scopes == ["all", "local"]
    assert bad.status_code == 422
    assert bad.headers["content-type"] == "application/problem+json"
    assert "scope" in bad.json()["detail"]
    assert denied.status_code == 401
