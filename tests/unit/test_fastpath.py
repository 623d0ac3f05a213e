"""The fast path of point queries (api/fastpath.py) gives a client exactly what
FastAPI gives: same status, same headers, same bytes, whatever the parameters;
and it answers the plain requests itself, while everything else reaches FastAPI."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.types import Receive, Scope, Send

from eddy.api.fastpath import PointQueries, plain_int, query_params
from eddy.plane.backend import QueryPlane
from tests.support.queryhost import Host, commit, query_api, sensor_in

TOKEN = "s3cret"


def build(backend: QueryPlane, token: str | None, fast: bool) -> FastAPI:
    api: FastAPI = query_api(backend, token, fast)
    return api


@pytest.fixture
async def pair(
    host: Host,
    plane: QueryPlane,
) -> AsyncIterator[tuple[AsyncClient, AsyncClient]]:
    for partition in (0, 1, 2, 3):
        commit(host.stores[partition], sensor_in(partition), [i * 5_000 for i in range(30)], 9)
    host.publish()
    clients = [
        AsyncClient(
            transport=ASGITransport(build(plane, None, fast), raise_app_exceptions=False),
            base_url="http://eddy",
        )
        for fast in (True, False)
    ]
    yield clients[0], clients[1]
    for client in clients:
        await client.aclose()


async def same_answer(pair: tuple[AsyncClient, AsyncClient], url: str, **kw: Any) -> int:
    fast = await pair[0].get(url, **kw)
    slow = await pair[1].get(url, **kw)
    assert (fast.status_code, fast.content) == (slow.status_code, slow.content), url
    for header in ("content-type", "content-length", "retry-after"):
        assert fast.headers.get(header) == slow.headers.get(header), (url, header)
    return fast.status_code


PATHS = [
    "/agents/sensor_averages/windows/{key}",
    "/sensors/{key}/windows",
    "/sensors/{key}/counts",
    "/sensors/{key}/minmax",
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "query",
    [
        "",
        "limit=10",
        "from_ms=5000&to_ms=50000&limit=3",
        "from_ms=50000&to_ms=5000",  # 400: the range is backwards
        "limit=0",  # 422
        "limit=1000000",  # 400: above the maximum
        "limit=abc",  # 422
        "from_ms=-1",  # 422
        "limit=5&limit=7",  # a repeat: FastAPI's to decide
        "from_ms=%2B5000",  # "+5000": not plain digits
        "to_ms=4611686018427387905",  # above the largest time
        "unknown=1&limit=2",
    ],
)
async def test_every_answer_is_fastapis(
    pair: tuple[AsyncClient, AsyncClient], path: str, query: str
) -> None:
    # Served by either process, and restoring (503). A key of another worker's
    # partition is forwarded by FastAPI (tests/unit/test_query_plane.py).
    for partition in (0, 3, 4):
        key = sensor_in(partition)
        await same_answer(pair, f"{path.format(key=key)}?{query}")
    await same_answer(pair, f"{path.format(key='no-such-sensor')}?{query}")  # 404
    await same_answer(pair, f"{path.format(key='x' * 201)}?{query}")  # 422: key too long


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    params=st.lists(
        st.tuples(
            st.sampled_from(["from_ms", "to_ms", "limit"]),
            st.one_of(
                st.integers(-5, 2**63).map(str),
                st.sampled_from(["", " 1", "1.0", "0x10", "1e3", "٣", "007", "-0"]),
            ),
        ),
        max_size=4,
    )
)
async def test_any_parameters_get_fastapis_answer(
    pair: tuple[AsyncClient, AsyncClient], params: list[tuple[str, str]]
) -> None:
    await same_answer(pair, f"/sensors/{sensor_in(1)}/windows", params=params)


async def test_a_token_is_checked_as_fastapi_checks_it(
    host: Host,
    plane: QueryPlane,
) -> None:
    commit(host.stores[0], sensor_in(0), [0, 5_000], 3)
    host.publish()
    apis = [build(plane, TOKEN, fast) for fast in (True, False)]
    clients = tuple(
        AsyncClient(transport=ASGITransport(api, raise_app_exceptions=False), base_url="http://e")
        for api in apis
    )
    url = f"/sensors/{sensor_in(0)}/windows"
    for auth in (None, f"Bearer {TOKEN}", f"bearer {TOKEN}", "Bearer wrong", TOKEN, "Basic x"):
        headers = {} if auth is None else {"authorization": auth}
        status = await same_answer(clients, url, headers=headers)  # type: ignore[arg-type]
        assert status == (200 if auth and auth.lower() == f"bearer {TOKEN}" else 401)
    for client in clients:
        await client.aclose()


async def test_plain_requests_are_answered_without_fastapi(
    pair: tuple[AsyncClient, AsyncClient],
) -> None:
    """The middleware alone, in front of an app that answers 599 to all: a plain
    point query is answered (200), anything it is unsure of goes on (599)."""
    api = pair[0]._transport.app  # type: ignore[attr-defined]
    middleware = next(m for m in api.user_middleware if m.cls is PointQueries)

    async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 599, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    alone = PointQueries(refuse, **middleware.kwargs)
    paths = {route.route.path for route in middleware.kwargs["routes"]}
    assert set(PATHS) <= paths
    async with AsyncClient(transport=ASGITransport(alone), base_url="http://e") as client:
        key = sensor_in(2)
        answer = await client.get(f"/sensors/{key}/windows?limit=4")
        assert answer.status_code == 200
        assert [w["window_start_ms"] for w in answer.json()["windows"]] == [
            0,
            5_000,
            10_000,
            15_000,
        ]
        assert (await client.get(f"/sensors/{key}/windows?limit=x")).status_code == 599
        assert (await client.get(f"/sensors/{sensor_in(4)}/windows")).status_code == 599
        assert (await client.get("/agents/sensor_averages/windows")).status_code == 599
        assert (await client.post(f"/sensors/{key}/windows")).status_code == 599


def test_plain_int_takes_only_digits_within_bounds() -> None:
    assert plain_int("42", 0, 100) == 42
    assert plain_int("007", 0, 100) == 7
    for text in ("", "-1", "+1", " 1", "1.0", "٣", "101", "9" * 20):
        assert plain_int(text, 0, 100) is None, text


def test_query_params_refuses_repeats() -> None:
    assert query_params(b"a=1&b=&c=%2B") == {"a": "1", "b": "", "c": "+"}
    assert query_params(b"a=1&a=2") is None
