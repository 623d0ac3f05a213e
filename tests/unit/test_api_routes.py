"""Every route of the API through the ASGI transport, with a fake backend serving
the reference app's views: the shapes clients rely on, the typed schemas made
from the agents' declarations, each error case as a JSON problem, the token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from httpx import ASGITransport, AsyncClient

from eddy import examples
from eddy.api.app import create_app
from eddy.app.plan import View
from eddy.app.queries import (
    Freshness,
    NoDataYetError,
    Owner,
    PartitionUnavailableError,
    StateValue,
    TablePage,
    UnknownKeyError,
    WindowPage,
)
from eddy.app.scans import KeyPage, SlicePage
from eddy.eventtime import MIN_WATERMARK, TimeWindow
from eddy.settings import Settings, build
from eddy.snapshot.layout import SnapshotRoot
from eddy.tables.catalog import Entry
from tests.support.kafka import TEST_AGENT_SETTINGS
from tests.unit.test_snapshot_export import assert_summarises_two_partitions, publish_two_partitions

NOW_MS = 1_000_000
OFFSETS = {"sensor-readings": 7}
FRESH = Freshness(1, 9_999, OFFSETS)
AVERAGE = {
    "sensor_id": "s1",
    "window_start_ms": 0,
    "window_end_ms": 5_000,
    "count": 4,
    "avg": 70.0,
    "min": 69.0,
    "max": 71.0,
    "timing": "first",
}
CHECK = {
    "vehicle_id": "v1",
    "window_start_ms": 1_000,
    "window_end_ms": 2_000,
    "second_ms": 1_000,
    "obd_speed_kmh": 50.0,
    "app_speed_kmh": 52.0,
    "diff_kmh": 2.0,
    "within_tolerance": True,
    "rolling_agreement": 0.75,
    "timing": "first",
}
ALERT = {"sensor_id": "s1", "kind": "freezing", "message": "Freezing Alarm for s1"}


def _built_views() -> list[View]:
    settings = build(Settings, {"topic_prefix": ""})
    names = [*examples.app.default_agents, "sensor_rooms"]
    return examples.app.build(settings, names, TEST_AGENT_SETTINGS).views


class FakeBackend:
    worker_id = "w-test"
    max_results = 50

    def __init__(self) -> None:
        self.unavailable = False
        self._views = _built_views()

    def is_live(self) -> bool:
        return True

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        return True, {}

    def views(self) -> list[View]:
        return self._views

    def agents(self) -> dict[str, list[str]]:
        return {v.agent: [v.stage] for v in self._views}

    def _check(self, key: str) -> None:
        if self.unavailable:
            raise PartitionUnavailableError("partition 1 is being restored", 1, 2)
        if key.startswith("unknown"):
            raise UnknownKeyError(f"no data for {key!r}")
        if key.startswith("new"):
            raise NoDataYetError(f"key {key!r} has no closed window yet")

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
        self._check(key)
        row = CHECK if agent == "vehicle_speed" else {**AVERAGE, "sensor_id": key}
        return WindowPage(key, [row], None, FRESH)

    def state(self, agent: str, state: str, key: str) -> StateValue:
        self._check(key)
        return StateValue(key, 72.5 if state == "last_temp" else [ALERT], FRESH)

    def owner(self, agent: str, key: str) -> Owner:
        return Owner(3, "http://w-test:8000", True)

    async def keys(
        self, agent: str, name: str, prefix: str, after: str | None, limit: int
    ) -> KeyPage:
        found = [k for k in ("s1", "s2", "s3", "t1") if k.startswith(prefix)]
        found = [k for k in found if after is None or k > after]
        more = len(found) > limit
        return KeyPage(found[:limit], found[limit - 1] if more else None, [0, 1], False)

    async def window_slice(
        self,
        agent: str,
        window_start_ms: int | None,
        after: str | None,
        order_by: str | None,
        descending: bool,
        limit: int,
    ) -> SlicePage:
        start = 120_000 if window_start_ms is None else window_start_ms
        rows: list[dict[str, Any]] = [
            {"hashtag": "flink", "window_start_ms": start, "window_end_ms": start + 60_000,
             "count": 2, "total": 2, "timing": "first"},
            {"hashtag": "kafka", "window_start_ms": start, "window_end_ms": start + 60_000,
             "count": 9, "total": 20, "timing": "first"},
        ]  # fmt: skip
        if order_by is not None:
            if order_by not in rows[0]:
                raise ValueError(f"order_by: results have no field {order_by!r}")
            rows.sort(key=lambda row: row[order_by], reverse=descending)
        return SlicePage(TimeWindow(start, start + 60_000), rows[:limit], None, [0, 1], False)

    def remote_owners(self, agent: str) -> dict[str, list[int]]:
        return {}  # one worker owns everything

    def stages(self) -> dict[str, list[str]]:
        return {
            "sensor_averages": ["results", "timers", "windows"],
            "sensor_alerts": [],
            "hashtag_counts.repartition": ["meta"],
        }

    def agent_of(self, stage: str) -> str:
        return stage.removesuffix(".repartition")

    def table_entries(
        self, stage: str, table: str, key: str, from_ms: int, to_ms: int, limit: int
    ) -> TablePage:
        if table == "timers":
            raise ValueError("table 'timers' is keyed by time, not by a record key")
        self._check(key)
        entries = [Entry(TimeWindow(0, 5_000), {"count": 2}), Entry(TimeWindow(5_000, 10_000), {})]
        return TablePage(key, "by_key_and_window", entries[:limit], 1 if limit < 2 else None, FRESH)

    def watermarks(self) -> dict[str, dict[int, int]]:
        return {"sensor_averages": {0: NOW_MS - 1_500, 1: MIN_WATERMARK}}

    def now_ms(self) -> int:
        return NOW_MS

    def metrics_text(self) -> tuple[bytes, str]:
        return b"eddy_records_in_total 1.0\n", "text/plain; version=0.0.4"

    def status(self) -> dict[str, Any]:
        return {"worker_id": self.worker_id, "stages": {}}


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


def _app(backend: FakeBackend, token: str | None = None, observe: Any = None) -> Any:
    return create_app(backend, token, observe, app=examples.app)


async def _client(backend: FakeBackend, token: str | None = None) -> AsyncClient:
    transport = ASGITransport(_app(backend, token), raise_app_exceptions=False)
    return AsyncClient(transport=transport, base_url="http://eddy")


@pytest.fixture
async def client(backend: FakeBackend) -> AsyncIterator[AsyncClient]:
    async with await _client(backend) as client:
        yield client


WINDOW_PATHS = [
    "/agents/sensor_averages/windows/s1",
    "/sensors/s1/windows",
    "/sensors/s1/counts",
    "/sensors/s1/minmax",
    "/hashtags/kafka/counts",
    "/teams/t1/powerups",
]


async def test_an_agents_windows_page_with_freshness(client: AsyncClient) -> None:
    response = await client.get(
        "/agents/sensor_averages/windows/s1", params={"from_ms": 0, "to_ms": 20_000, "limit": 5}
    )
    assert response.status_code == 200
    assert response.json() == {
        "key": "s1",
        "windows": [AVERAGE],
        "next_from_ms": None,
        "freshness": {
            "served_by": "w-test",
            "partition": 1,
            "watermark_ms": 9_999,
            "committed_offsets": OFFSETS,
        },
    }


async def test_aliases_answer_like_their_targets(client: AsyncClient) -> None:
    target = (await client.get("/agents/sensor_averages/windows/s1")).json()
    assert (await client.get("/sensors/s1/windows")).json() == target
    alerts = (await client.get("/sensors/s1/alerts")).json()
    assert alerts["value"][0]["kind"] == "freezing"
    checks = (await client.get("/vehicles/v1/checks")).json()
    assert checks["windows"][0]["diff_kmh"] == 2.0


@pytest.mark.parametrize("path", WINDOW_PATHS)
@pytest.mark.parametrize(
    "params",
    [{"from_ms": 10, "to_ms": 5}, {"limit": 51}],
    ids=["inverted range", "limit above the maximum"],
)
async def test_window_routes_reject_bad_ranges(
    client: AsyncClient, path: str, params: dict[str, int]
) -> None:
    response = await client.get(path, params=params)
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 400


@pytest.mark.parametrize(
    "path",
    [*WINDOW_PATHS, "/sensors/unknown-1/alerts", "/agents/sensor_alerts/state/last_temp/unknown-1"],
)
async def test_unknown_keys_are_404_problems(client: AsyncClient, path: str) -> None:
    path = path.replace("/s1", "/unknown-1").replace("/kafka/", "/unknown-1/")
    path = path.replace("/t1/", "/unknown-1/").replace("/v1/", "/unknown-1/")
    response = await client.get(path)
    assert response.status_code == 404, path
    assert response.json()["detail"].startswith("no ")


async def test_a_key_with_only_open_windows_is_409_not_404(client: AsyncClient) -> None:
    response = await client.get("/agents/sensor_averages/windows/new-1")
    assert response.status_code == 409
    assert "no closed window yet" in response.json()["detail"]


async def test_a_partition_that_moves_is_503_everywhere(
    backend: FakeBackend, client: AsyncClient
) -> None:
    backend.unavailable = True
    for path in [*WINDOW_PATHS, "/sensors/s1/alerts", "/sensors/s1", "/vehicles/v1/agreement"]:
        response = await client.get(path)
        assert response.status_code == 503, path
        assert response.headers["retry-after"] == "2"
        assert response.json()["partition"] == 1


async def test_a_sensor_summary_and_a_vehicles_agreement(client: AsyncClient) -> None:
    summary = (await client.get("/sensors/s1")).json()
    assert summary["latest_temperature"] == 72.5
    assert summary["rolling_minute"]["readings"] == 4
    assert summary["rolling_minute"]["avg"] == 70.0
    agreement = (await client.get("/vehicles/v1/agreement")).json()
    assert agreement == {
        "key": "v1",
        "checks": 1,
        "agreement_rate": 1.0,
        "rolling_agreement": 0.75,
    }


async def test_every_keys_result_of_one_window_ordered_by_a_field(client: AsyncClient) -> None:
    top = (await client.get("/hashtags/top", params={"order_by": "count", "limit": 1})).json()
    assert top["window_start_ms"] == 120_000
    assert [r["hashtag"] for r in top["results"]] == ["kafka"]
    by_key = (await client.get("/agents/hashtag_counts/windows")).json()
    assert [r["hashtag"] for r in by_key["results"]] == ["flink", "kafka"]
    bad = await client.get("/agents/hashtag_counts/windows", params={"order_by": "nope"})
    assert bad.status_code == 400


async def test_keys_of_a_view_by_prefix_with_a_cursor(client: AsyncClient) -> None:
    first = (
        await client.get("/agents/sensor_averages/keys", params={"prefix": "s", "limit": 2})
    ).json()
    assert first["keys"] == ["s1", "s2"]
    assert first["next_after"] == "s2"
    rest = await client.get(
        "/agents/sensor_averages/keys", params={"prefix": "s", "after": "s2", "limit": 2}
    )
    assert rest.json()["keys"] == ["s3"]
    assert rest.json()["next_after"] is None


async def test_which_worker_owns_a_key(client: AsyncClient) -> None:
    body = (await client.get("/agents/sensor_averages/owner/s1")).json()
    assert body == {
        "agent": "sensor_averages",
        "key": "s1",
        "partition": 3,
        "owner_url": "http://w-test:8000",
        "served_here": True,
    }


async def test_the_agents_and_what_they_serve(client: AsyncClient) -> None:
    listing = (await client.get("/agents")).json()
    by_name = {a["name"]: a for a in listing["agents"]}
    assert {
        "kind": "windows",
        "name": "windows",
        "path": "/agents/sensor_averages/windows/{key}",
    } in by_name["sensor_averages"]["views"]
    states = {v["name"] for v in by_name["sensor_alerts"]["views"]}
    assert states == {"last_temp", "recent", "counts"}


async def test_the_openapi_schema_types_each_agents_results(client: AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    models = schema["components"]["schemas"]
    averages = models["SensorAveragesWindow"]["properties"]
    assert averages["avg"]["type"] == "number"
    assert averages["count"]["type"] == "integer"
    assert averages["sensor_id"]["type"] == "string"
    checks = models["VehicleSpeedWindow"]["properties"]
    assert checks["within_tolerance"]["type"] == "boolean"
    recent = models["SensorAlertsRecent"]["properties"]["value"]
    assert recent["items"]["$ref"].endswith("/Alert")
    page = schema["paths"]["/agents/sensor_averages/windows/{key}"]["get"]
    assert set(page["responses"]) >= {"200", "404", "503"}


async def test_the_generic_table_view(client: AsyncClient) -> None:
    listing = (await client.get("/stages")).json()
    assert listing["stages"] == [
        {"stage": "hashtag_counts.repartition", "agent": "hashtag_counts", "tables": ["meta"]},
        {"stage": "sensor_alerts", "agent": "sensor_alerts", "tables": []},
        {
            "stage": "sensor_averages",
            "agent": "sensor_averages",
            "tables": ["results", "timers", "windows"],
        },
    ]
    path = "/stages/sensor_averages/tables/results/keys/s1"
    page = (await client.get(path, params={"limit": 1})).json()
    assert (page["stage"], page["agent"], page["table"]) == (
        "sensor_averages",
        "sensor_averages",
        "results",
    )
    assert page["entries"] == [
        {"window_start_ms": 0, "window_end_ms": 5_000, "value": {"count": 2}}
    ]
    assert page["next_from_ms"] == 1
    timers = await client.get("/stages/sensor_averages/tables/timers/keys/s1")
    assert timers.status_code == 400
    assert "keyed by time" in timers.json()["detail"]
    other = await client.get("/stages/nope/tables/results/keys/s1")
    assert other.status_code == 404
    assert "stage 'nope'" in other.json()["detail"]
    bad_name = await client.get("/stages/sensor_averages/tables/re$ults/keys/s1")
    assert bad_name.status_code == 422


async def test_watermarks_with_lag_and_partitions_without_data(client: AsyncClient) -> None:
    body = (await client.get("/watermarks")).json()
    assert body["stages"]["sensor_averages"] == {
        "agent": "sensor_averages",
        "partitions": [
            {"partition": 0, "watermark_ms": NOW_MS - 1_500, "lag_ms": 1_500},
            {"partition": 1, "watermark_ms": None, "lag_ms": None},
        ],
    }


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
        paths = ["/sensors/s1/windows", "/agents", "/sensors/s1", "/metrics", "/watermarks"]
        for path in paths:
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
    app = _app(backend, None, lambda route, method, status, _: seen.append((route, method, status)))
    transport = ASGITransport(app, raise_app_exceptions=False)
    async with AsyncClient(transport=transport, base_url="http://eddy") as client:
        await client.get("/sensors/s1/alerts")
        await client.get("/sensors/unknown-9/alerts")
        await client.get("/no/such/route")
    assert seen == [
        ("/sensors/{key}/alerts", "GET", 200),
        ("/sensors/{key}/alerts", "GET", 404),
        ("unmatched", "GET", 404),
    ]


async def test_a_snapshot_id_that_is_no_real_time_is_a_422(client: AsyncClient) -> None:
    bad = await client.get("/snapshots/67443345T388804869Z")
    assert bad.status_code == 422
    assert "not a real date" in bad.json()["detail"]
    unsupported = await client.post("/snapshots")
    assert unsupported.status_code == 400  # the fake backend takes no snapshots


class SnapshotsBackend(FakeBackend):
    """A worker's backend as far as listing, showing and disposing of snapshots
    go: they read the root in its settings (taking one is not faked)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.settings = settings
        self.operations: dict[str, Any] = {}

    def start_snapshot(self, kind: str) -> Any:
        raise NotImplementedError("taking one needs workers")

    def start_stop(self, savepoint: bool) -> Any:
        raise NotImplementedError("stopping needs workers")

    async def take_part(self, kind: str, snapshot_id: str) -> dict[str, Any]:
        raise NotImplementedError("taking one needs workers")

    async def stop_phase(self, phase: Any) -> dict[str, Any]:
        raise NotImplementedError("stopping needs workers")


OLDER, NEWER = "20300101T000000000Z", "20300101T000100000Z"


async def test_snapshots_are_listed_shown_and_disposed_of_over_rest(tmp_path: Path) -> None:
    root = SnapshotRoot.open(str(tmp_path / "snapshots"))
    for found_id in (OLDER, NEWER):
        publish_two_partitions(root, "eddy", found_id, tmp_path / "scratch")
    folder = tmp_path / "snapshots" / "eddy"
    settings = build(Settings, {"snapshot_root": str(tmp_path / "snapshots"), "app_id": "eddy"})
    async with await _client(SnapshotsBackend(settings)) as client:
        listed = (await client.get("/snapshots")).json()
        assert [s["id"] for s in listed["items"]] == [OLDER, NEWER]
        assert listed["next_after"] is None
        first = (await client.get("/snapshots", params={"limit": 1})).json()
        assert ([s["id"] for s in first["items"]], first["next_after"]) == ([OLDER], OLDER)
        rest = (await client.get("/snapshots", params={"after": OLDER})).json()
        assert [s["id"] for s in rest["items"]] == [NEWER]

        shown = await client.get(f"/snapshots/{OLDER}")
        assert shown.status_code == 200
        summary = shown.json()
        assert summary == listed["items"][0]
        assert (summary["app_id"], summary["rows"], summary["location"]) == (
            "eddy",
            33,
            str(folder / OLDER),
        )
        assert_summarises_two_partitions(summary)

        disposed = await client.delete(f"/snapshots/{OLDER}")
        assert disposed.status_code == 200
        assert disposed.json() == {"id": OLDER, "location": str(folder / OLDER)}
        assert not (folder / OLDER).exists()
        assert [s["id"] for s in (await client.get("/snapshots")).json()["items"]] == [NEWER]
        for gone in (
            await client.get(f"/snapshots/{OLDER}"),
            await client.delete(f"/snapshots/{OLDER}"),
        ):
            assert gone.status_code == 404
            assert gone.headers["content-type"] == "application/problem+json"
            assert f"no complete snapshot 'eddy/{OLDER}'" in gone.json()["detail"]
        assert (await client.get(f"/snapshots/{NEWER}")).status_code == 200


async def test_the_schema_declares_a_problem_for_every_error_and_a_type_for_every_answer(
    client: AsyncClient,
) -> None:
    schema = (await client.get("/openapi.json")).json()
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    untyped, undeclared = [], []
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            for status, response in operation["responses"].items():
                content = response.get("content", {})
                if status.startswith(("4", "5")):
                    problem = content.get("application/problem+json", {}).get("schema", {})
                    if problem.get("$ref") != "#/components/schemas/Problem":
                        undeclared.append((method, path, status))
                if status.startswith("2") and path != "/metrics":
                    body = content.get("application/json", {}).get("schema", {})
                    if not body or body == {}:
                        untyped.append((method, path, status))
            assert {"422", "500"} <= set(operation["responses"]), (method, path)
    assert undeclared == []
    assert untyped == []


async def test_the_probes_answer_503_as_a_problem_saying_what_the_200_says(
    backend: FakeBackend, client: AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = (await client.get("/openapi.json")).json()
    for path in ("/healthz", "/readyz"):
        declared = schema["paths"][path]["get"]["responses"]["503"]["content"]
        assert declared == {
            "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
        }, path
    restoring = {"sensor_averages": {"agent": "sensor_averages", "ready": False}}
    monkeypatch.setattr(backend, "is_live", lambda: False)
    monkeypatch.setattr(backend, "readiness", lambda: (False, restoring))
    for path in ("/healthz", "/readyz"):
        answer = await client.get(path)
        assert answer.status_code == 503, path
        assert answer.headers["content-type"] == "application/problem+json"
        body = answer.json()
        assert (body["status"], body["title"], body["instance"]) == (
            503,
            "Service Unavailable",
            path,
        )
        assert body["worker_id"] == "w-test"
        assert body["detail"]
    ready = (await client.get("/readyz")).json()
    assert (ready["ready"], ready["stages"]) == (False, restoring)
    assert "sensor_averages" in ready["detail"]


# Fields of Eddy's own machinery, which the workers exchange among themselves.
INTERNAL_FIELDS = {"fan_out", "phase", "snapshot_id"}


def _property_names(node: Any) -> set[str]:
    """Every property (and parameter) name anywhere in a schema, inline ones too."""
    names: set[str] = set()
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict):
            names |= set(node["properties"])
        if node.get("in") in ("path", "query", "header") and isinstance(node.get("name"), str):
            names.add(node["name"])
        for value in node.values():
            names |= _property_names(value)
    elif isinstance(node, list):
        for value in node:
            names |= _property_names(value)
    return names


async def test_nothing_internal_is_in_the_public_schema(client: AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    assert not [path for path in schema["paths"] if path.startswith("/internal")]
    named = _property_names(schema["paths"]) | _property_names(schema["components"])
    assert {"key", "window_start_ms", "operation_id"} <= named  # the walk sees into both
    assert named & INTERNAL_FIELDS == set()
    unpublished = await client.post("/internal/stop/hold")  # there, for the workers alone
    assert unpublished.status_code == 400
    assert unpublished.json()["detail"] == "this server runs no operations"


async def test_a_key_is_called_key_in_every_path_and_every_envelope(
    backend: FakeBackend, client: AsyncClient
) -> None:
    """Whatever an agent's records call their key (sensor_id, vehicle_id...), the
    API calls it key: in the path and in the answer around the results, which
    keep their own field names."""
    record_keys = {view.key_field for view in backend.views()} - {"key"}
    assert {"sensor_id", "vehicle_id", "hashtag", "team"} <= record_keys
    schema = (await client.get("/openapi.json")).json()
    in_paths = {
        (parameter["name"], path)
        for path, methods in schema["paths"].items()
        for operation in methods.values()
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "path"
    }
    assert ("key", "/sensors/{key}") in in_paths
    assert {(n, p) for n, p in in_paths if n in record_keys or n.endswith("_key")} == set()

    models = schema["components"]["schemas"]
    envelopes = 0
    for path, methods in schema["paths"].items():
        if "{key}" not in path:
            continue
        for method, operation in methods.items():
            ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
            fields = models[ok["$ref"].rsplit("/", 1)[-1]]["properties"]
            assert "key" in fields, (method, path)
            assert set(fields) & record_keys == set(), (method, path)
            envelopes += 1
    assert envelopes >= len(WINDOW_PATHS) + 2  # aliases and the app's own routes too
    averages = models["SensorAveragesWindow"]["properties"]
    assert "sensor_id" in averages  # a result inside the envelope keeps its name
