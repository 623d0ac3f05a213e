"""Forwarding a query to the worker that owns its key's partition.

Any worker answers any key: when another worker owns the partition (the group's
assignment says which, see ``eddy.runtime.assignor``), the request goes there
once, and the owner's answer comes back unchanged, ``served_by`` included. A
forwarded request is never forwarded again: if the owner has moved meanwhile,
the answer is 503 with Retry-After, and the client retries after the rebalance.
"""

from __future__ import annotations

import asyncio
import logging
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
TIMEOUT_S = 5.0
# The owner's headers worth passing on; hop-by-hop ones are not.
PASSED_HEADERS = ("content-type", "retry-after")


def install(app: FastAPI, worker_id: str) -> None:
    @app.exception_handler(OwnedElsewhereError)
    async def forward(request: Request, exc: OwnedElsewhereError) -> Response:
        if request.headers.get(FORWARDED_HEADER):
            return _unavailable(request, exc, "ownership moved while forwarding")
        client = _client(app)
        headers = {FORWARDED_HEADER: worker_id}
        if auth := request.headers.get("authorization"):
            headers["authorization"] = auth
        try:
            answer = await client.get(same_request(exc.owner_url, request), headers=headers)
        except httpx.HTTPError as error:
            # The owner is down or restarting; the group will reassign its partitions.
            log.info(
                "forwarding %s to %s failed: %s",
                request.url.path,
                redact_url(exc.owner_url),
                redact(repr(error)),
            )
            return _unavailable(request, exc, "its owner does not answer (restarting?)")
        passed = {k: v for k, v in answer.headers.items() if k.lower() in PASSED_HEADERS}
        return Response(answer.content, status_code=answer.status_code, headers=passed)


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
            not answer: a partial answer is never presented as the whole.
    """
    if not owners:
        return []
    if "" in owners:
        raise PartitionUnavailableError("some partitions have no owner yet (rebalancing)", -1, 1)
    client = _client(request.app)
    headers = {FORWARDED_HEADER: "scatter"}
    if auth := request.headers.get("authorization"):
        headers["authorization"] = auth

    async def one(url: str) -> dict[str, Any]:
        try:
            answer = await client.get(url + path, params=params, headers=headers)
        except httpx.HTTPError as error:
            raise PartitionUnavailableError(
                f"the worker at {url} (partitions {owners[url]}) does not answer: {error!r}",
                owners[url][0],
                1,
            ) from None
        if answer.status_code != 200:
            raise PartitionUnavailableError(
                f"the worker at {url} answered {answer.status_code}", owners[url][0], 1
            )
        body: dict[str, Any] = answer.json()
        return body

    return list(await asyncio.gather(*(one(url) for url in sorted(owners))))


def _client(app: FastAPI) -> httpx.AsyncClient:
    client: httpx.AsyncClient | None = getattr(app.state, "forward_client", None)
    if client is None:
        client = httpx.AsyncClient(timeout=TIMEOUT_S)
        app.state.forward_client = client
    return client


def _unavailable(request: Request, exc: OwnedElsewhereError, why: str) -> JSONResponse:
    return problem(
        503,
        f"partition {exc.partition} is owned by the worker at {exc.owner_url}, but {why}",
        request,
        headers={"Retry-After": "1"},
        partition=exc.partition,
    )
