"""Every route of the API through the ASGI transport, with a fake backend: the
shapes clients rely on, each error case as a JSON problem, the optional token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from httpx import ASGITransport, AsyncClient

from api.app import create_app
from service.eventtime import MIN_WATERMARK, TimeWindow
from service.queries import (
    PartitionUnavailableError,
    StateValue,
    TablePage,
    UnknownKeyError,
    WindowPage,
    WindowTop,
)
from tables.catalog import Entry

NOW_MS = 1_000_000
COUNTS = {"sensor_id": "s1", "window_start_ms": 0, "window_end_ms": 10_000, "count": 4}
OFFSETS = {"sensor-readings": 7}


class FakeBackend:
    worker_id = "w-test"
    max_results = 50

    def __init__(self) -> None:
        self.unavailable = False

    def is_live(self) -> bool:
        return True

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        return True, {}

    def _check(self, key: str) -> None:
        if self.unavailable:
            raise PartitionUnavailableError("partition 1 is being restored", 1, 2)
        if key.startswith("unknown"):
            raise UnknownKeyError(f"no data for {key!r}")

    def sensor_windows(self, sensor_id: str, from_ms: int, to_ms: int, limit: int) -> WindowPage:
        self._check(sensor_id)
        averages = {**COUNTS, "avg": 70.0, "min": 69.0, "max": 71.0, "timing": "first"}
        return WindowPage(sensor_id, 1, [averages], None, 9_999, OFFSETS)

    def windows(self, pipeline: str, key: str, from_ms: int, to_ms: int, limit: int) -> WindowPage:
        self._check(key)
        return WindowPage(key, 1, [{**COUNTS, "pipeline": pipeline}], None, 9_999, OFFSETS)

    def window_key_state(self, pipeline: str, key: str) -> StateValue:
        self._check(key)
        state = {"checks": 4, "agreements": 3, "recent": [1, 1, 0, 1]}
        return StateValue(key, 1, state, OFFSETS)

    def window_top(
        self, pipeline: str, window_start_ms: int | None, size_ms: int, n: int, field: str
    ) -> WindowTop:
        start = 120_000 if window_start_ms is None else window_start_ms
        rows = [
            {"hashtag": "kafka", "count": 9, "total": 20},
            {"hashtag": "flink", "count": 2, "total": 2},
        ]
        return WindowTop(TimeWindow(start, start + size_ms), rows[:n], [0, 1])

    def state_value(self, pipeline: str, state: str, key: str) -> StateValue:
        self._check(key)
        if state == "last_temp":
            return StateValue(key, 1, 72.5, OFFSETS)
        return StateValue(key, 1, [{"kind": "freezing"}], OFFSETS)

    def pipelines(self) -> dict[str, list[str]]:
        return {"sensor_averages": ["results", "timers", "windows"], "sensor_alerts": []}

    def table_entries(
        self, pipeline: str, table: str, key: str, from_ms: int, to_ms: int, limit: int
    ) -> TablePage:
        if table == "timers":
            raise ValueError("table 'timers' is keyed by time, not by a record key")
        self._check(key)
        entries = [Entry(TimeWindow(0, 5_000), {"count": 2}), Entry(TimeWindow(5_000, 10_000), {})]
        return TablePage(
            key, 1, "by_key_and_window", entries[:limit], 1 if limit < 2 else None, 9_999, OFFSETS
        )

    def remote_owners(self, pipeline: str) -> dict[str, list[int]]:
        return {}  # one worker owns everything

    def table_keys(self, pipeline: str, table: str, limit: int) -> list[str]:
        if table == "timers":
            raise ValueError("table 'timers' is keyed by time, not by a record key")
        return ["s1", "s2"][:limit]

    def watermarks(self) -> dict[str, dict[int, int]]:
        return {"sensor_averages": {0: NOW_MS - 1_500, 1: MIN_WATERMARK}}

    def now_ms(self) -> int:
        return NOW_MS

    def metrics_text(self) -> tuple[bytes, str]:
        return b"eddy_records_in_total 1.0\n", "text/plain; version=0.0.4"

    def status(self) -> dict[str, Any]:
        return {"worker_id": self.worker_id, "pipelines": {}}


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


async def _client(backend: FakeBackend, token: str | None = None) -> AsyncClient:
    transport = ASGITransport(create_app(backend, token), raise_app_exceptions=False)  # type: ignore[arg-type]
    return AsyncClient(transport=transport, base_url="http://eddy")


@pytest.fixture
async def client(backend: FakeBackend) -> AsyncIterator[AsyncClient]:
    async with await _client(backend) as client:
        yield client


WINDOW_ROUTES = [
    ("/sensors/s1/minmax", "sensor_minmax"),
    ("/sensors/s1/counts", "sensor_counts"),
    ("/vehicles/s1/checks", "vehicle_speed"),
    ("/hashtags/s1/counts", "hashtag_counts"),
    ("/teams/s1/powerups", "team_powerups"),
]


@pytest.mark.parametrize(("path", "pipeline"), WINDOW_ROUTES)
async def test_window_routes_page_results_with_freshness(
    client: AsyncClient, path: str, pipeline: str
) -> None:
    response = await client.get(path, params={"from_ms": 0, "to_ms": 20_000, "limit": 5})
    assert response.status_code == 200
    body = response.json()
    assert body["windows"] == [{**COUNTS, "pipeline": pipeline}]
    assert body["freshness"]["served_by"] == "w-test"
    assert body["freshness"]["committed_offsets"] == OFFSETS


@pytest.mark.parametrize(("path", "_"), WINDOW_ROUTES)
@pytest.mark.parametrize(
    ("params", "status"),
    [({"from_ms": 9, "to_ms": 1}, 400), ({"limit": 51}, 400), ({"from_ms": "x"}, 422)],
)
async def test_window_routes_reject_bad_ranges(
    client: AsyncClient, path: str, _: str, params: dict[str, Any], status: int
) -> None:
    response = await client.get(path, params=params)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize(
    "path",
    [
        "/sensors/unknown/minmax",
        "/sensors/unknown/alerts",
        "/vehicles/unknown/agreement",
        "/pipelines/sensor_averages/state/recent/keys/unknown",
        "/pipelines/sensor_averages/tables/results/keys/unknown",
    ],
)
async def test_unknown_keys_are_404_problems(client: AsyncClient, path: str) -> None:
    response = await client.get(path)
    assert response.status_code == 404
    assert "unknown" in response.json()["detail"]


async def test_a_partition_that_moves_is_503_everywhere(
    client: AsyncClient, backend: FakeBackend
) -> None:
    backend.unavailable = True
    for path in ["/sensors/s1/alerts", "/vehicles/s1/agreement", "/teams/s1/powerups"]:
        response = await client.get(path)
        assert response.status_code == 503
        assert response.headers["retry-after"] == "2"


async def test_a_sensor_summary_has_its_latest_reading_and_rolling_minute(
    client: AsyncClient,
) -> None:
    body = (await client.get("/sensors/s1")).json()
    assert body["latest_temperature"] == 72.5
    assert body["last_window"]["avg"] == 70.0
    assert body["rolling_minute"] == {
        "windows": 1,
        "readings": 4,
        "avg": 70.0,
        "min": 69.0,
        "max": 71.0,
    }
    assert (await client.get("/sensors/unknown-1")).status_code == 404


async def test_alerts_and_agreement(client: AsyncClient) -> None:
    alerts = (await client.get("/sensors/s1/alerts")).json()
    assert alerts["state"] == [{"kind": "freezing"}]
    agreement = (await client.get("/vehicles/v1/agreement")).json()
    assert agreement["agreement_rate"] == 0.75
    assert agreement["rolling_agreement"] == 0.75
    assert agreement["checks"] == 4


async def test_top_hashtags_of_a_window_and_bad_window_starts(client: AsyncClient) -> None:
    top = (await client.get("/hashtags/top", params={"n": 1})).json()
    assert top["top"] == [{"hashtag": "kafka", "count": 9, "total": 20}]
    assert (top["window_start_ms"], top["window_end_ms"]) == (120_000, 180_000)
    response = await client.get("/hashtags/top", params={"window_start_ms": 1_000})
    assert response.status_code == 400
    assert "minute boundary" in response.json()["detail"]


async def test_the_generic_table_view(client: AsyncClient) -> None:
    listing = (await client.get("/pipelines")).json()
    assert listing["pipelines"] == [
        {"name": "sensor_alerts", "tables": []},
        {"name": "sensor_averages", "tables": ["results", "timers", "windows"]},
    ]
    keys = (await client.get("/pipelines/sensor_averages/tables/results/keys")).json()
    assert keys["keys"] == ["s1", "s2"]
    path = "/pipelines/sensor_averages/tables/results/keys/s1"
    page = (await client.get(path, params={"limit": 1})).json()
    assert page["entries"] == [
        {"window_start_ms": 0, "window_end_ms": 5_000, "value": {"count": 2}}
    ]
    assert page["next_from_ms"] == 1
    timers = await client.get("/pipelines/sensor_averages/tables/timers/keys/s1")
    assert timers.status_code == 400
    assert "keyed by time" in timers.json()["detail"]
    other = await client.get("/pipelines/nope/tables/results/keys/s1")
    assert other.status_code == 404
    bad_name = await client.get("/pipelines/sensor_averages/tables/re$ults/keys/s1")
    assert bad_name.status_code == 422


async def test_watermarks_with_lag_and_partitions_without_data(client: AsyncClient) -> None:
    body = (await client.get("/watermarks")).json()
    assert body["pipelines"]["sensor_averages"] == [
        {"partition": 0, "watermark_ms": NOW_MS - 1_500, "lag_ms": 1_500},
        {"partition": 1, "watermark_ms": None, "lag_ms": None},
    ]


async def test_the_dashboard_is_served_from_the_package(client: AsyncClient) -> None:
    root = await client.get("/", follow_redirects=False)
    assert root.status_code == 307
    assert root.headers["location"] == "/dashboard"
    page = await client.get("/dashboard")
    assert page.status_code == 200
    assert '<script src="/dashboard.js">' in page.text
    assert "http" not in page.text.replace("http://www.w3.org", "")  # no CDN
    script = await client.get("/dashboard.js")
    assert script.headers["content-type"].startswith("text/javascript")


async def test_a_token_guards_everything_but_probes_and_the_page(backend: FakeBackend) -> None:
    async with await _client(backend, token="s3cret") as client:
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/readyz")).status_code == 200
        assert (await client.get("/dashboard")).status_code == 200
        for path in ["/sensors/s1/windows", "/metrics", "/watermarks", "/pipelines"]:
            denied = await client.get(path)
            assert denied.status_code == 401, path
            assert denied.headers["www-authenticate"] == "Bearer"
            assert denied.headers["content-type"] == "application/problem+json"
            wrong = await client.get(path, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            right = await client.get(path, headers={"Authorization": "Bearer s3cret"})
            assert right.status_code == 200, path


async def test_request_latency_is_observed_per_route_template(backend: FakeBackend) -> None:
    seen: list[tuple[str, str, int]] = []
    app = create_app(
        backend, None, lambda route, method, status, _: seen.append((route, method, status))
    )  # type: ignore[arg-type]
    transport = ASGITransport(app, raise_app_exceptions=False)
    async with AsyncClient(transport=transport, base_url="http://eddy") as client:
        await client.get("/sensors/s1/alerts")
        await client.get("/sensors/unknown-9/alerts")
        await client.get("/no/such/route")
    assert seen == [
        ("/sensors/{sensor_id}/alerts", "GET", 200),
        ("/sensors/{sensor_id}/alerts", "GET", 404),
        ("unmatched", "GET", 404),
    ]


async def test_a_snapshot_id_that_is_no_real_time_is_a_422(client: AsyncClient) -> None:
    bad = await client.post("/snapshots", json={"snapshot_id": "67443345T388804869Z"})
    assert bad.status_code == 422
    assert "not a real date" in bad.json()["detail"]
    unsupported = await client.post("/snapshots", json={})
    assert unsupported.status_code == 400  # the fake backend takes no snapshots
