"""The API's contract with a fake backend: shapes, status codes, problem bodies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from httpx import ASGITransport, AsyncClient

from api.app import create_app
from service.queries import PartitionUnavailableError, UnknownKeyError, WindowPage

WINDOW = {
    "sensor_id": "sensor_1",
    "window_start_ms": 0,
    "window_end_ms": 5_000,
    "count": 3,
    "avg": 70.0,
    "min": 68.0,
    "max": 72.0,
    "timing": "first",
}


class FakeBackend:
    worker_id = "w-test"
    max_results = 50

    def __init__(self) -> None:
        self.ready = True
        self.recovering = False
        self.calls: list[tuple[str, int, int, int]] = []

    def is_live(self) -> bool:
        return True

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        return self.ready, {"sensor_averages": {"ready": self.ready}}

    def sensor_windows(self, sensor_id: str, from_ms: int, to_ms: int, limit: int) -> WindowPage:
        self.calls.append((sensor_id, from_ms, to_ms, limit))
        if self.recovering:
            raise PartitionUnavailableError("partition 3 is being restored", 3, 2)
        if sensor_id != "sensor_1":
            raise UnknownKeyError(f"no data for {sensor_id!r}")
        return WindowPage(sensor_id, 3, [WINDOW], None, 9_000, {"sensor-readings": 12})

    def metrics_text(self) -> tuple[bytes, str]:
        return b"eddy_records_in_total 1.0\n", "text/plain; version=0.0.4"

    def status(self) -> dict[str, Any]:
        return {"worker_id": self.worker_id}


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
async def client(backend: FakeBackend) -> AsyncIterator[AsyncClient]:
    transport = ASGITransport(create_app(backend), raise_app_exceptions=False)
    async with AsyncClient(transport=transport, base_url="http://eddy") as client:
        yield client


async def test_windows_of_a_known_sensor(client: AsyncClient, backend: FakeBackend) -> None:
    response = await client.get("/sensors/sensor_1/windows", params={"from_ms": 0, "to_ms": 10_000})
    assert response.status_code == 200
    body = response.json()
    assert body["windows"][0]["avg"] == 70.0
    assert body["freshness"] == {
        "served_by": "w-test",
        "partition": 3,
        "watermark_ms": 9_000,
        "committed_offsets": {"sensor-readings": 12},
    }
    assert backend.calls == [("sensor_1", 0, 10_000, 50)]


async def test_unknown_sensor_is_a_404_problem(client: AsyncClient) -> None:
    response = await client.get("/sensors/nope/windows")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == "no data for 'nope'"


@pytest.mark.parametrize(
    ("params", "status", "fragment"),
    [
        ({"from_ms": "yesterday"}, 422, "from_ms"),
        ({"from_ms": -1}, 422, "from_ms"),
        ({"to_ms": 1.5}, 422, "to_ms"),
        ({"from_ms": 10, "to_ms": 5}, 400, "must not be after"),
        ({"limit": 0}, 422, "limit"),
        ({"limit": 51}, 400, "maximum of 50"),
    ],
)
async def test_bad_parameters_are_4xx_problems_never_500(
    client: AsyncClient, params: dict[str, Any], status: int, fragment: str
) -> None:
    response = await client.get("/sensors/sensor_1/windows", params=params)
    assert response.status_code == status
    body = response.json()
    assert body["status"] == status
    assert fragment in body["detail"]


async def test_recovering_partition_is_503_with_retry_after(
    client: AsyncClient, backend: FakeBackend
) -> None:
    backend.recovering = True
    response = await client.get("/sensors/sensor_1/windows")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "2"
    assert response.json()["partition"] == 3


async def test_readiness_follows_the_backend(client: AsyncClient, backend: FakeBackend) -> None:
    assert (await client.get("/readyz")).status_code == 200
    backend.ready = False
    response = await client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["ready"] is False
    assert (await client.get("/healthz")).json() == {"status": "ok", "worker_id": "w-test"}


async def test_unknown_route_is_a_json_404(client: AsyncClient) -> None:
    response = await client.get("/nothing-here")
    assert response.status_code == 404
    assert response.json()["title"] == "Not Found"


async def test_metrics_are_prometheus_text(client: AsyncClient) -> None:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert "eddy_records_in_total" in response.text
