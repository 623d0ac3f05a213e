"""A query for a key whose owner cannot be reached answers 503 in bounded time,
naming the owner and the reason, never a hang: an owner that drops SYNs (a cut
link), one that accepts but never answers (a stopped process), one that refuses;
a burst of queries for a dead owner does not wait for it again and again; and an
owner that answers again, or comes back under a new address, is asked again."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Iterator

import orjson
import pytest
from httpx import ASGITransport, AsyncClient, Response

from eddy.api.forward import CONNECT_TIMEOUT_MS, DEADLINE_MS, UNREACHABLE_FOR_MS, Unreachable
from eddy.plane.backend import QueryPlane
from tests.support import queryhost
from tests.support.queryhost import Host, query_api, sensor_in

SENSOR = sensor_in(5)  # partition 5 is the peer's (tests/support/queryhost.py)
PATH = f"/sensors/{SENSOR}/windows"
# What a user notices: the answer comes well before a client's usual 5 s.
CLIENT_PATIENCE_S = 5.0


class FakeClock:
    def __init__(self) -> None:
        self.now_ms = 0

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
async def client(plane: QueryPlane) -> AsyncIterator[AsyncClient]:
    transport = ASGITransport(query_api(plane), raise_app_exceptions=False)
    async with AsyncClient(transport=transport, base_url="http://eddy") as found:
        yield found
        forward_client = getattr(found._transport.app.state, "forward_client", None)  # type: ignore[attr-defined]
        if forward_client is not None:
            await forward_client.aclose()


def owner_is(host: Host, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The group's assignment now names ``url`` as partition 5's owner."""
    monkeypatch.setattr(queryhost, "PEER", url)
    host.publish()


@pytest.fixture
def black_hole() -> Iterator[str]:
    """An address whose SYNs are never answered, as across a cut link: a listener
    that never accepts, its accept queue filled (Linux then drops the SYNs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    filler = socket.create_connection(listener.getsockname())
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    filler.close()
    listener.close()


async def silent() -> asyncio.Server:
    """A worker that accepts connections and never answers (a stopped process)."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client gives up

    return await asyncio.start_server(hold, "127.0.0.1", 0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


OWNER_ANSWER = {"key": SENSOR, "windows": [], "freshness": {"served_by": "peer"}}


async def answering(port: int = 0) -> asyncio.Server:
    """A worker that answers every request with OWNER_ANSWER."""
    body = orjson.dumps(OWNER_ANSWER)
    head = (
        f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.readuntil(b"\r\n\r\n"):
            writer.write(head.encode() + body)
            await writer.drain()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await answer(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", port)


def url_of(server: asyncio.Server) -> str:
    return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def timed_get(client: AsyncClient, path: str = PATH) -> tuple[float, Response]:
    started = time.monotonic()
    answer = await client.get(path)
    return time.monotonic() - started, answer


def assert_unreachable(answer: Response, owner: str, reason: str) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.headers["retry-after"] == str(-(-UNREACHABLE_FOR_MS // 1_000))
    body = answer.json()
    assert (body["owner"], body["partition"]) == (owner, 5)
    assert body["reason"].startswith(reason), body
    assert owner in body["detail"], body
    assert reason in body["detail"], body


@pytest.mark.parametrize(
    ("owner", "reason", "within_s"),
    [
        # Each within its timeout, and a margin for a busy host.
        ("black_hole", "connect timed out", CONNECT_TIMEOUT_MS / 1_000 + 1.5),
        ("silent", f"no answer within {DEADLINE_MS / 1_000:g} s", DEADLINE_MS / 1_000 + 1.5),
        ("refused", "connection refused", 1.5),
    ],
)
async def test_an_owner_that_cannot_be_reached_is_a_503_naming_it_and_why(
    owner: str,
    reason: str,
    within_s: float,
    host: Host,
    client: AsyncClient,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = await silent() if owner == "silent" else None
    if server is not None:
        url = url_of(server)
    elif owner == "refused":
        url = f"http://127.0.0.1:{free_port()}"
    else:
        url = request.getfixturevalue(owner)
    try:
        owner_is(host, url, monkeypatch)
        took_s, answer = await timed_get(client)
        assert_unreachable(answer, url, reason)
        assert took_s < within_s < CLIENT_PATIENCE_S
        # Asked again at once: answered at once, saying so.
        took_s, answer = await timed_get(client)
        assert_unreachable(answer, url, f"recently unreachable ({reason}")
        assert took_s < 1.0
    finally:
        if server is not None:
            server.close()


async def test_a_burst_of_queries_for_a_cut_off_owner_all_answer_in_time(
    host: Host, client: AsyncClient, black_hole: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,000 queries: the first 200 at once wait for their connection to time out,
    together; every later one (100 at a time) is told at once, without asking
    (without the breaker, each would wait again: 8 more waves of 1 s and more)."""
    client._transport.app.state.forward_unreachable = Unreachable(now_ms=FakeClock())  # type: ignore[attr-defined]
    owner_is(host, black_hole, monkeypatch)
    first = await asyncio.gather(*(timed_get(client) for _ in range(200)))
    later: list[tuple[float, Response]] = []
    for _ in range(8):
        later += await asyncio.gather(*(timed_get(client) for _ in range(100)))
    # How long they take under load is measured against a real worker
    # (tests/integration/test_forward_partition.py): here, that none asked again.
    for _, answer in first + later:
        assert_unreachable(answer, black_hole, "")
    reasons = {answer.json()["reason"] for _, answer in later}
    assert reasons == {"recently unreachable (connect timed out)"}


async def test_an_owner_that_answers_again_is_asked_again(
    host: Host, client: AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    client._transport.app.state.forward_unreachable = Unreachable(now_ms=clock)  # type: ignore[attr-defined]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    owner_is(host, url, monkeypatch)
    assert_unreachable((await timed_get(client))[1], url, "connection refused")
    server = await answering(port)  # the owner is back, at the same address
    try:
        assert_unreachable((await timed_get(client))[1], url, "recently unreachable")
        clock.now_ms += UNREACHABLE_FOR_MS
        answer = await client.get(PATH)
        assert answer.status_code == 200, answer.text
        assert answer.json() == OWNER_ANSWER  # passed on unchanged, freshness included
        assert (await client.get(PATH)).json() == OWNER_ANSWER
    finally:
        server.close()


async def test_an_owner_back_under_a_new_address_is_asked_at_once(
    host: Host, client: AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = f"http://127.0.0.1:{free_port()}"
    owner_is(host, old, monkeypatch)
    assert_unreachable((await timed_get(client))[1], old, "connection refused")
    server = await answering()
    try:
        owner_is(host, url_of(server), monkeypatch)  # the next rebalance names it
        answer = await client.get(PATH)
        assert answer.status_code == 200, answer.text
        assert answer.json() == OWNER_ANSWER
    finally:
        server.close()


async def test_a_scatter_query_names_the_owner_that_cannot_be_reached(
    host: Host, client: AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    owner_is(host, url, monkeypatch)
    answer = await client.get("/agents/sensor_averages/windows", params={"window_start_ms": 0})
    assert_unreachable(answer, url, "connection refused")


async def test_a_forwarded_query_the_owner_no_longer_owns_is_not_forwarded_again(
    client: AsyncClient,
) -> None:
    answer = await client.get(PATH, headers={"x-eddy-forwarded-by": "w2"})
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "1"  # the next rebalance is near
    body = answer.json()
    assert (body["owner"], body["partition"]) == (queryhost.PEER, 5)
    assert body["reason"] == "ownership moved while forwarding"


async def test_the_schema_declares_the_owner_and_the_reason_of_a_503(client: AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    problem = schema["components"]["schemas"]["Problem"]["properties"]
    assert {"owner", "reason", "partition"} <= set(problem)
    declared = schema["paths"]["/sensors/{key}/windows"]["get"]["responses"]["503"]
    assert declared["content"]["application/problem+json"]["schema"] == {
        "$ref": "#/components/schemas/Problem"
    }


def test_a_missed_owner_is_blocked_for_a_while_then_probed_by_one_request() -> None:
    clock = FakeClock()
    unreachable = Unreachable(now_ms=clock, memory_ms=2_000, deadline_ms=2_500)
    owner, other = "http://a:8000", "http://b:8000"
    assert unreachable.blocked(owner) is None
    unreachable.missed(owner, "connect timed out")
    assert unreachable.blocked(owner) == "connect timed out"
    assert unreachable.blocked(other) is None  # a new address is never blocked
    clock.now_ms += 2_000
    assert unreachable.blocked(owner) is None  # this request probes
    assert unreachable.blocked(owner) == "connect timed out"  # the others do not wait
    clock.now_ms += 2_500  # the probe was cancelled: it blocks no longer
    assert unreachable.blocked(owner) is None
    unreachable.answered(owner)
    assert unreachable.blocked(owner) is None
    assert unreachable.blocked(owner) is None
