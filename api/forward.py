"""Forwarding a query to the worker that owns its key's partition.

Any worker answers any key: when another worker owns the partition (the group's
assignment says which, see ``eddy.runtime.assignor``), the request goes there
once, and the owner's answer comes back unchanged, ``served_by`` and freshness
included (nothing is cached here, so no answer is older than the freshness it
states). A forwarded request is never forwarded again: if the owner has moved
meanwhile, the answer is 503 with Retry-After, and the client retries after the
rebalance.

An owner the network cut off does not refuse: its SYNs go unanswered. So every
exchange with an owner has one deadline (:data:`DEADLINE_MS`), and an owner that
missed it is answered for at once, for a short while (:class:`Unreachable`):
1,000 queries for a cut-off owner's keys then answer 503 within the deadline,
instead of queueing for connections that each wait for a timeout.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from eddy.api.errors import problem
from eddy.api.segments import forwardable
from eddy.app.queries import OwnedElsewhereError, PartitionUnavailableError
from eddy.redact import redact, redact_url

log = logging.getLogger(__name__)

FORWARDED_HEADER = "x-eddy-forwarded-by"
# Peers share a cluster network: a connection takes milliseconds, and a SYN not
# answered within 1 s (Linux's first retransmission) is a cut link, not a slow one.
CONNECT_TIMEOUT_MS = 1_000
# The whole exchange with an owner (waiting for a pooled connection, connecting,
# the owner's own work, reading its answer) ends by then. A healthy owner answers
# in milliseconds; the 5 s a client typically waits must also cover this worker's
# own queueing when it is busy (measured: up to 2.5 s more on a loaded host).
DEADLINE_MS = 2_000
# How long an owner that missed the deadline is answered for at once: long enough
# that a burst of queries does not wait for it again, short enough that a healed
# link (or a worker back at the same address) is used again within a rebalance.
UNREACHABLE_FOR_MS = 2_000
# Connections to all owners together; a request waiting for one still ends by
# DEADLINE_MS (the pool timeout is within it).
MAX_CONNECTIONS = 200
# The owner's headers worth passing on; hop-by-hop ones are not.
PASSED_HEADERS = ("content-type", "retry-after")
MOVED = "ownership moved while forwarding"
RECENTLY_UNREACHABLE = "recently unreachable"


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass
class _Miss:
    reason: str
    until_ms: int


class Unreachable:
    """Owner URLs that did not answer lately, so queries for them answer 503 at
    once (a circuit breaker per URL). It is keyed by URL: an owner that comes back
    under a new address is asked as soon as the assignment names it."""

    def __init__(
        self,
        now_ms: Callable[[], int] = _monotonic_ms,
        memory_ms: int = UNREACHABLE_FOR_MS,
        deadline_ms: int = DEADLINE_MS,
    ) -> None:
        self._now_ms = now_ms
        self._memory_ms = memory_ms
        self._deadline_ms = deadline_ms
        self._missed: dict[str, _Miss] = {}

    def blocked(self, url: str) -> str | None:
        """Why ``url`` is not to be asked now, or None: ask it.

        Once the memory ends one request asks again; until it is answered (or its
        deadline passes, so a cancelled one blocks no longer), the others do not.
        """
        miss = self._missed.get(url)
        if miss is None:
            return None
        now_ms = self._now_ms()
        if now_ms < miss.until_ms:
            return miss.reason
        miss.until_ms = now_ms + self._deadline_ms
        return None

    def answered(self, url: str) -> None:
        if self._missed.pop(url, None) is not None:
            log.info("the worker at %s answers again", redact_url(url))

    def missed(self, url: str, reason: str) -> None:
        now_ms = self._now_ms()
        if url not in self._missed:
            log.warning("the worker at %s does not answer: %s", redact_url(url), reason)
        # Addresses of workers long gone are forgotten (pods change addresses).
        self._missed = {u: m for u, m in self._missed.items() if m.until_ms > now_ms}
        self._missed[url] = _Miss(reason, now_ms + self._memory_ms)


class OwnerUnreachableError(PartitionUnavailableError):
    """The worker owning the partition did not answer in time: retry after
    Retry-After (the group moves its partitions if it is gone for good)."""

    def __init__(self, partition: int, owner_url: str, reason: str) -> None:
        super().__init__(
            f"partition {partition} is owned by the worker at {owner_url}, "
            f"which cannot be reached: {reason}",
            partition,
            math.ceil(UNREACHABLE_FOR_MS / 1_000),
        )
        self.owner_url = owner_url
        self.reason = reason


def install(app: FastAPI, worker_id: str) -> None:
    @app.exception_handler(OwnedElsewhereError)
    async def forward(request: Request, exc: OwnedElsewhereError) -> Response:
        if request.headers.get(FORWARDED_HEADER):
            return _unavailable(request, exc, exc.owner_url, MOVED, exc.retry_after_s)
        target = same_request(exc.owner_url, request)
        headers = _headers(request, worker_id)
        try:
            answer = await exchange(
                request.app, exc.owner_url, exc.partition, lambda c: c.get(target, headers=headers)
            )
        except OwnerUnreachableError as error:
            return _unavailable(request, error, error.owner_url, error.reason, error.retry_after_s)
        passed = {k: v for k, v in answer.headers.items() if k.lower() in PASSED_HEADERS}
        return Response(answer.content, status_code=answer.status_code, headers=passed)

    @app.exception_handler(OwnerUnreachableError)
    async def unreachable(request: Request, exc: OwnerUnreachableError) -> JSONResponse:
        return _unavailable(request, exc, exc.owner_url, exc.reason, exc.retry_after_s)


async def exchange(
    app: FastAPI,
    owner_url: str,
    partition: int,
    send: Callable[[httpx.AsyncClient], Awaitable[httpx.Response]],
) -> httpx.Response:
    """``send``'s answer from the owner at ``owner_url``, within :data:`DEADLINE_MS`.

    Raises:
        OwnerUnreachableError: the owner did not answer lately, or not now.
    """
    unreachable = _unreachable(app)
    if (reason := unreachable.blocked(owner_url)) is not None:
        raise OwnerUnreachableError(partition, owner_url, f"{RECENTLY_UNREACHABLE} ({reason})")
    try:
        async with asyncio.timeout(DEADLINE_MS / 1_000):
            answer = await send(_client(app))
    except (httpx.HTTPError, TimeoutError) as error:
        reason = why(error)
        log.debug("asking %s failed: %s", redact_url(owner_url), redact(repr(error)))
        unreachable.missed(owner_url, reason)
        raise OwnerUnreachableError(partition, owner_url, reason) from None
    unreachable.answered(owner_url)
    return answer


def why(error: BaseException) -> str:
    """The reason an exchange failed, in words an operator can act on."""
    if isinstance(error, httpx.ConnectTimeout):
        return "connect timed out"
    if isinstance(error, TimeoutError | httpx.TimeoutException):
        return f"no answer within {DEADLINE_MS / 1_000:g} s"
    if isinstance(error, httpx.ConnectError):
        cause: BaseException | None = error
        while cause is not None:
            if isinstance(cause, ConnectionRefusedError):
                return "connection refused"
            cause = cause.__cause__ or cause.__context__
        return f"cannot connect ({error})"
    return f"the connection failed ({type(error).__name__}: {error})"


def same_request(owner_url: str, request: Request) -> httpx.URL:
    """``request``'s URL at ``owner_url``: its path and query as the client sent them,
    byte for byte (decoded and encoded again, a key such as ``100%25``, ``a%2Fb`` or
    ``%2E%2E`` would reach the owner as another key, or another route)."""
    raw_path = request.scope.get("raw_path") or quote(request.scope["path"]).encode()
    query = request.scope.get("query_string", b"")
    target = forwardable(raw_path) + (b"?" + query if query else b"")
    return httpx.URL(owner_url).copy_with(raw_path=target)


async def ask_owners(
    request: Request, owners: dict[str, list[int]], path: str, params: dict[str, Any]
) -> list[dict[str, Any]]:
    """The answers of the workers owning the partitions not served here (scatter).

    Raises:
        PartitionUnavailableError: a partition has no known owner, or its owner did
            not answer (:class:`OwnerUnreachableError`): a partial answer is never
            presented as the whole.
    """
    if not owners:
        return []
    if "" in owners:
        raise PartitionUnavailableError("some partitions have no owner yet (rebalancing)", -1, 1)
    headers = _headers(request, "scatter")

    async def one(url: str) -> dict[str, Any]:
        answer = await exchange(
            request.app,
            url,
            owners[url][0],
            lambda c: c.get(url + path, params=params, headers=headers),
        )
        if answer.status_code != 200:
            raise PartitionUnavailableError(
                f"the worker at {url} answered {answer.status_code}", owners[url][0], 1
            )
        body: dict[str, Any] = answer.json()
        return body

    return list(await asyncio.gather(*(one(url) for url in sorted(owners))))


def _headers(request: Request, forwarded_by: str) -> dict[str, str]:
    headers = {FORWARDED_HEADER: forwarded_by}
    if auth := request.headers.get("authorization"):
        headers["authorization"] = auth
    return headers


def _client(app: FastAPI) -> httpx.AsyncClient:
    client: httpx.AsyncClient | None = getattr(app.state, "forward_client", None)
    if client is None:
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(DEADLINE_MS / 1_000, connect=CONNECT_TIMEOUT_MS / 1_000),
            limits=httpx.Limits(max_connections=MAX_CONNECTIONS),
        )
        app.state.forward_client = client
    return client


def _unreachable(app: FastAPI) -> Unreachable:
    found: Unreachable | None = getattr(app.state, "forward_unreachable", None)
    if found is None:
        found = Unreachable()
        app.state.forward_unreachable = found
    return found


def _unavailable(
    request: Request, exc: PartitionUnavailableError, owner_url: str, reason: str, retry_s: int
) -> JSONResponse:
    detail = (
        str(exc)
        if isinstance(exc, OwnerUnreachableError)
        else f"partition {exc.partition} is owned by the worker at {owner_url}, but {reason}"
    )
    return problem(
        503,
        detail,
        request,
        headers={"Retry-After": str(retry_s)},
        partition=exc.partition,
        owner=redact_url(owner_url),
        reason=reason,
    )
