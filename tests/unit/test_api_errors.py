"""The API's contract with a fake backend: shapes, status codes, problem bodies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from httpx import ASGITransport, AsyncClient

from eddy import examples
from eddy.api.app import create_app
from eddy.app.queries import WindowPage
from tests.unit.test_api_routes import FakeBackend as RoutesBackend


class FakeBackend(RoutesBackend):
    """The routes test's backend, counting window queries and with a readiness."""

    def __init__(self) -> None:
        super().__init__()
        self.ready = True
        self.calls: list[tuple[str, int, int, int]] = []

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        return self.ready, {"sensor_averages": {"agent": "sensor_averages", "ready": self.ready}}

    def windows(
        self,
        agent: str,
        key: str,
        from_ms: int,
        to_ms: int,
        limit: int,
        *,
        newest_first: bool = False,
    ) -> WindowPage:
        self.calls.append((key, from_ms, to_ms, limit))
        return super().windows(agent, key, from_ms, to_ms, limit, newest_first=newest_first)


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
async def client(backend: FakeBackend) -> AsyncIterator[AsyncClient]:
    app = create_app(backend, app=examples.app)  # type: ignore[arg-type]
    transport = ASGITransport(app, raise_app_exceptions=False)
    async with AsyncClient(transport=transport, base_url="http://eddy") as client:
        yield client


async def test_windows_of_a_known_sensor(client: AsyncClient, backend: FakeBackend) -> None:
    response = await client.get("/sensors/sensor_1/windows", params={"from_ms": 0, "to_ms": 10_000})
    assert response.status_code == 200
    body = response.json()
    assert body["windows"][0]["avg"] == 70.0
    assert body["freshness"] == {
        "served_by": "w-test",
        "partition": 1,
        "watermark_ms": 9_999,
        "committed_offsets": {"sensor-readings": 7},
    }
    assert backend.calls == [("sensor_1", 0, 10_000, 50)]


async def test_unknown_sensor_is_a_404_problem(client: AsyncClient) -> None:
    response = await client.get("/sensors/unknown-1/windows")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == "no data for 'unknown-1'"


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
    backend.unavailable = True
    response = await client.get("/sensors/sensor_1/windows")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "2"
    assert response.json()["partition"] == 1


async def test_readiness_follows_the_backend(client: AsyncClient, backend: FakeBackend) -> None:
    assert (await client.get("/readyz")).status_code == 200
    backend.ready = False
    response = await client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["ready"] is False
    assert response.json()["stages"]["sensor_averages"]["ready"] is False
    assert (await client.get("/healthz")).json() == {"status": "ok", "worker_id": "w-test"}


async def test_unknown_route_is_a_json_404(client: AsyncClient) -> None:
    response = await client.get("/nothing-here")
    assert response.status_code == 404
    assert response.json()["title"] == "Not Found"


async def test_metrics_are_prometheus_text(client: AsyncClient) -> None:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert "eddy_records_in_total" in response.text


@pytest.mark.parametrize("body", [{"savepont": True}, {"savepoint": "yes"}, {"savepoint": 1}])
async def test_a_stop_request_with_a_misspelt_or_mistyped_field_stops_nothing(
    client: AsyncClient, body: dict[str, Any]
) -> None:
    # Lenient parsing would stop every worker without the savepoint that was asked for.
    response = await client.post("/stop", json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    # The same request spelt right passes validation (this backend runs no operations).
    assert (await client.post("/stop", json={"savepoint": True})).status_code == 400
