"""The query process of ``eddy worker`` without a broker: real RocksDB stores written
as an ingest process writes them, the reports an ingest process publishes, and the
API answering from them through secondary instances (routes, freshness, 503 while
restoring, forwarding, readiness, metrics, the app's own routes)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from httpx import ASGITransport, AsyncClient

from eddy.app.queries import PartitionUnavailableError
from eddy.metrics import Metrics
from eddy.plane.backend import QueryPlane
from eddy.plane.stages import LocalStage, Secondaries
from eddy.plane.status import OWNER, claim_reports_dir, reports_dir
from tests.support.queryhost import (
    ME,
    PEER,
    STAGE,
    Host,
    commit,
    query_api,
    query_plane,
    sensor_in,
)


@pytest.fixture
async def client(plane: QueryPlane) -> AsyncIterator[AsyncClient]:
    transport = ASGITransport(query_api(plane), raise_app_exceptions=False)
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
    secondaries = Secondaries(tmp_path / "throttled", 200, clock=lambda: now_s[0])
    api = query_api(query_plane(host, tmp_path, secondaries))
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


def test_each_worker_reports_in_shared_memory_of_its_own_else_under_its_state(
    tmp_path: Path,
) -> None:
    shm = tmp_path / "shm"
    shm.mkdir()
    one, other = tmp_path / "a" / ".query", tmp_path / "b" / ".query"
    assert reports_dir(one, shm).parent == shm
    assert reports_dir(one, shm) == reports_dir(one, shm)
    assert reports_dir(one, shm) != reports_dir(other, shm)
    assert reports_dir(one, tmp_path / "no-shm") == one / "status"


def test_a_worker_removes_the_reports_of_workers_that_died_without_removing_them(
    tmp_path: Path,
) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone, alive, foreign = (tmp_path / name for name in ("eddy-gone", "eddy-alive", "eddy-x"))
    for directory, owner in ((gone, str(dead.pid)), (alive, str(os.getpid())), (foreign, "?")):
        directory.mkdir()
        (directory / "0.json").write_text("{}")
        (directory / OWNER).write_text(owner)
    mine = tmp_path / "eddy-mine"
    claim_reports_dir(mine, pid=4242)
    assert not gone.exists()  # its worker was killed: nobody else would remove it
    assert alive.exists()  # a running worker's
    assert foreign.exists()  # not one it can judge
    assert (mine / OWNER).read_text() == "4242"
