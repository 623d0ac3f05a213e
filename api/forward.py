"""Forwarding a query to the worker that owns its key's partition.

Any worker answers any key: when another worker owns the partition (the group's
assignment says which, see ``service.runtime.assignor``), the request goes there
once, and the owner's answer comes back unchanged, ``served_by`` included. A
forwarded request is never forwarded again: if the owner has moved meanwhile,
the answer is 503 with Retry-After, and the client retries after the rebalance.
"""

from __future__ import annotations

import logging

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from api.errors import problem
from service.queries import OwnedElsewhereError

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
        url = exc.owner_url + request.url.path
        headers = {FORWARDED_HEADER: worker_id}
        if auth := request.headers.get("authorization"):
            headers["authorization"] = auth
        try:
            answer = await client.get(url, params=request.query_params, headers=headers)
        except httpx.HTTPError as error:
            # The owner is down or restarting; the group will reassign its partitions.
            log.info("forwarding %s to %s failed: %r", request.url.path, exc.owner_url, error)
            return _unavailable(request, exc, "its owner does not answer (restarting?)")
        passed = {k: v for k, v in answer.headers.items() if k.lower() in PASSED_HEADERS}
        return Response(answer.content, status_code=answer.status_code, headers=passed)


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
