"""Any key can be queried: percent-encoded, a key holding ``/``, ``%``, spaces or
non-ASCII, or that is ``.`` or ``..``, is one path segment, answered here (fast
path or FastAPI) or forwarded to its owner byte for byte, and never routed
elsewhere. Against the query plane over real stores (tests/support/queryhost.py),
with what httpx sends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx
import pytest
from httpx import ASGITransport, AsyncClient
from hypothesis import given, settings
from hypothesis import strategies as st

from eddy.api.segments import decoded, forwardable, routed_path
from eddy.app.queries import partition_for
from eddy.eventtime import TimeWindow
from eddy.pipeline.windowed import RESULTS, RESULTS_BY_WINDOW
from eddy.plane.backend import QueryPlane
from tests.support.queryhost import PARTITIONS, Host, average, commit, query_api

# Each in a partition served here (0-3, tests/support/queryhost.py).
LOCAL_KEYS = ["..", "a/b", "/", "100%", "%25", "a b", "é", "x?y#z", "ü/..", "a/windows"]
PEER_KEYS = [".", "../x"]  # partition 5: the peer's


def path_of(key: str) -> str:
    """A key as docs/api.md tells clients to put it in a path: percent-encoded
    (``quote(key, safe="")``, ``encodeURIComponent``), and a key that is ``.`` or
    ``..`` as ``%2E``/``%2E%2E``, which the encoders leave as dots."""
    encoded = quote(key, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


@pytest.fixture(params=[True, False], ids=["fast-path", "fastapi"])
async def client(request: pytest.FixtureRequest, plane: QueryPlane) -> AsyncIterator[AsyncClient]:
    api = query_api(plane, fast=request.param)
    async with AsyncClient(transport=ASGITransport(api), base_url="http://eddy") as found:
        yield found


def test_the_keys_of_this_test_are_where_it_says() -> None:
    assert all(partition_for(key, PARTITIONS) in (0, 1, 2, 3) for key in LOCAL_KEYS)
    assert all(partition_for(key, PARTITIONS) == 5 for key in PEER_KEYS)


@pytest.mark.parametrize("key", LOCAL_KEYS)
async def test_any_key_is_one_segment_of_every_route_that_takes_a_key(
    host: Host, client: AsyncClient, key: str
) -> None:
    commit(host.stores[partition_for(key, PARTITIONS)], key, [0, 5_000], 3)
    host.publish()
    for path in (
        f"/agents/sensor_averages/windows/{path_of(key)}",
        f"/sensors/{path_of(key)}/windows",  # the app's alias
    ):
        answer = await client.get(path)
        assert answer.status_code == 200, (path, answer.text)
        body = answer.json()
        assert body["key"] == key
        assert [w["sensor_id"] for w in body["windows"]] == [key, key]
    owner = (await client.get(f"/agents/sensor_averages/owner/{path_of(key)}")).json()
    assert (owner["key"], owner["partition"]) == (key, partition_for(key, PARTITIONS))
    # The app's own route (/sensors/{key}) reads the key it was given, too.
    summary = await client.get(f"/sensors/{path_of(key)}")
    assert summary.status_code == 200, summary.text
    assert summary.json()["rolling_minute"]["windows"] == 2


async def test_a_key_holding_a_routes_tail_is_not_routed_there(
    host: Host, client: AsyncClient
) -> None:
    """``s/windows`` is the summary route's key, not sensor ``s``'s windows."""
    here = (0, 1, 2, 3)
    sensor = next(
        f"s{n}"
        for n in range(100)
        if {partition_for(f"s{n}", PARTITIONS), partition_for(f"s{n}/windows", PARTITIONS)}
        <= set(here)
    )
    commit(host.stores[partition_for(sensor, PARTITIONS)], sensor, [0], 3)
    host.publish()
    assert (await client.get(f"/sensors/{sensor}/windows")).status_code == 200
    answer = await client.get(f"/sensors/{path_of(sensor + '/windows')}")
    assert answer.status_code == 404, answer.text
    assert f"'{sensor}/windows'" in answer.json()["detail"]
    unknown = await client.get(f"/agents/sensor_averages/windows/{path_of('x/y/z')}")
    assert unknown.status_code == 404
    assert unknown.json()["detail"] == "no data for key 'x/y/z'"


@pytest.mark.parametrize("key", PEER_KEYS)
async def test_a_key_another_worker_owns_is_forwarded_byte_for_byte(
    plane: QueryPlane, key: str
) -> None:
    asked: list[bytes] = []

    def peer(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.raw_path)
        return httpx.Response(200, json={"from": "peer"})

    api = query_api(plane)
    api.state.forward_client = httpx.AsyncClient(transport=httpx.MockTransport(peer))
    sent = f"/sensors/{path_of(key)}/windows"
    async with AsyncClient(transport=ASGITransport(api), base_url="http://eddy") as client:
        answer = await client.get(sent, params={"from_ms": "0", "limit": "5"})
    await api.state.forward_client.aclose()
    assert answer.json() == {"from": "peer"}
    assert asked == [f"{sent}?from_ms=0&limit=5".encode()]


KEYS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1)


@settings(max_examples=300)
@given(keys=st.lists(KEYS, min_size=1, max_size=4))
def test_a_path_of_encoded_keys_routes_as_segments_and_decodes_to_the_keys(
    keys: list[str],
) -> None:
    raw = ("/agents/" + "/".join(path_of(key) for key in keys)).encode()
    segments = routed_path(raw).split("/")
    assert segments[:2] == ["", "agents"]
    assert [decoded(segment) for segment in segments[2:]] == keys
    # Forwarded, the path keeps its meaning: the same segments, decoded the same.
    assert routed_path(forwardable(raw)) == routed_path(raw)


def test_dot_segments_are_forwarded_encoded_so_no_client_removes_them() -> None:
    assert forwardable(b"/sensors/../windows") == b"/sensors/%2E%2E/windows"
    assert forwardable(b"/sensors/./w/a.b") == b"/sensors/%2E/w/a.b"
    assert forwardable(b"/sensors/%2E%2E") == b"/sensors/%2E%2E"


async def test_a_key_listing_merges_the_peers_page_up_to_the_lowest_continuation(
    host: Host, plane: QueryPlane
) -> None:
    """Partition 5 is the peer's: its page (a budget spent at ``k4``) and this
    worker's (every key) make one page up to ``k4``, which goes on from there."""
    here = [k for k in (f"k{n}" for n in range(100)) if partition_for(k, PARTITIONS) < 4]
    mine = [here[0], here[2], here[4]]  # one before, between and after the peer's keys
    theirs = [here[1], here[3]]
    for key in mine:
        commit(host.stores[partition_for(key, PARTITIONS)], key, [0], 3)
    host.publish()
    asked: list[httpx.Request] = []

    def peer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        page = {"keys": theirs, "next_after": theirs[-1], "partitions": [5]}
        return httpx.Response(200, json=page | {"budget_exhausted": True})

    api = query_api(plane)
    api.state.forward_client = httpx.AsyncClient(transport=httpx.MockTransport(peer))
    async with AsyncClient(transport=ASGITransport(api), base_url="http://eddy") as client:
        answer = await client.get("/agents/sensor_averages/keys", params={"prefix": "k"})
    await api.state.forward_client.aclose()
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "agent": "sensor_averages",
        "view": "windows",
        "keys": sorted([*mine[:2], *theirs], key=lambda k: (len(k), k)),
        "next_after": theirs[-1],
        "budget_exhausted": True,
        "partitions": [0, 1, 2, 3, 5],
    }
    assert [dict(r.url.params) for r in asked] == [
        {"view": "windows", "prefix": "k", "limit": "100", "scope": "local"}
    ]


async def test_a_windows_ranking_merges_the_peers_page_and_asks_it_the_same(
    host: Host, plane: QueryPlane
) -> None:
    here = [k for k in (f"k{n}" for n in range(100)) if partition_for(k, PARTITIONS) < 4][:3]
    window = TimeWindow(0, 5_000)
    for count, key in enumerate(here):
        txn = host.stores[partition_for(key, PARTITIONS)].begin()
        row = average(key, 0, count=count + 1)
        txn.put(RESULTS, (key, window), row)
        txn.put(RESULTS_BY_WINDOW, (window, key), row)
        txn.commit(txn.changelog_records(), 4)
    host.publish()
    asked: list[httpx.Request] = []

    def peer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        rows = [average("k", 0, count=10)]  # ranks first; "k" is below every key here
        body = {"window_start_ms": 0, "window_end_ms": 5_000, "results": rows}
        return httpx.Response(200, json=body | {"next_after": "k", "budget_exhausted": True,
                                                 "partitions": [5]})  # fmt: skip

    api = query_api(plane)
    api.state.forward_client = httpx.AsyncClient(transport=httpx.MockTransport(peer))
    params = {"window_start_ms": "0", "order_by": "count", "limit": "2"}
    async with AsyncClient(transport=ASGITransport(api), base_url="http://eddy") as client:
        ranked = (await client.get("/agents/sensor_averages/windows", params=params)).json()
        bad = await client.get("/agents/sensor_averages/windows", params={"after": "k"})
    await api.state.forward_client.aclose()
    # Only what both have examined counts: up to "k", the peer's continuation.
    assert [(r["sensor_id"], r["count"]) for r in ranked["results"]] == [("k", 10)]
    assert (ranked["next_after"], ranked["budget_exhausted"]) == ("k", True)
    assert ranked["partitions"] == [0, 1, 2, 3, 5]
    assert dict(asked[0].url.params) == params | {"descending": "true", "scope": "local"}
    assert bad.status_code == 400
    assert "window_start_ms" in bad.json()["detail"]
