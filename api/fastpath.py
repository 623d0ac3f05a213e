"""One key's windows, answered without FastAPI's request machinery.

``GET /agents/<agent>/windows/{key}`` (and the app's aliases of it) is what a
dashboard polls, hundreds of times a second. Through FastAPI a point query costs
about 440 µs of CPU in the query process, most of it matching the path against
every route and resolving the route's dependencies, not reading RocksDB; this
path answers the same request in a fraction of that (docs/performance.md, "REST
during ingest").

It only ever answers 200, from the same backend call and the same response
model, with the same bytes and headers. Whatever it is not sure of (a parameter
that is not plain digits, a repeated one, an error of any kind: a key owned by
another worker, a restoring partition, a bad range) goes on to FastAPI
untouched, so every error keeps its one definition there, and so does the
OpenAPI schema.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from eddy.api.backend import Backend
from eddy.api.segments import decoded

# The backend and a request's key and query parameters -> the JSON answer, or None
# when FastAPI should answer instead.
PointAnswer = Callable[[Backend, str, Mapping[str, str]], bytes | None]

MAX_KEY_CHARS = 200  # as eddy.api.params.Key declares it
_DIGITS = frozenset("0123456789")


@dataclass(frozen=True)
class FastRoute:
    route: APIRoute  # the route it stands in for: its path, template and schema
    answer: PointAnswer


def plain_int(text: str, low: int, high: int) -> int | None:
    """``text`` as an int in ``[low, high]`` if it is plain decimal digits; None for
    anything else, which FastAPI then validates (and rejects with its 422)."""
    if not text or len(text) > 19 or not _DIGITS.issuperset(text):
        return None
    value = int(text)
    return value if low <= value <= high else None


def query_params(query_string: bytes) -> dict[str, str] | None:
    """Each parameter's value, as Starlette parses the query; None if one repeats
    (FastAPI's choice among repeats is its own to make)."""
    found: dict[str, str] = {}
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if name in found:
            return None
        found[name] = value
    return found


class PointQueries:
    """ASGI middleware: the routes of ``routes`` answered here when it can, the rest
    by the app it wraps."""

    def __init__(
        self, app: ASGIApp, routes: list[FastRoute], backend: Backend, api_token: str | None
    ) -> None:
        self.app = app
        self.routes = routes
        self.backend = backend
        self.expected = None if api_token is None else f"bearer {api_token}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and self._authorized(scope):
            for fast in self.routes:
                matched = fast.route.path_regex.match(scope["path"])
                if matched is None:
                    continue
                key = decoded(matched.group("key"))
                body = self._answer(fast, key, scope["query_string"])
                if body is not None:
                    scope["route"] = fast.route  # for the request metrics' route label
                    await _send_json(send, body)
                    return
                break
        await self.app(scope, receive, send)

    def _answer(self, fast: FastRoute, key: str, query_string: bytes) -> bytes | None:
        params = query_params(query_string)
        if params is None or len(key) > MAX_KEY_CHARS:
            return None
        return fast.answer(self.backend, key, params)

    def _authorized(self, scope: Scope) -> bool:
        if self.expected is None:
            return True
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                given = f"{scheme.lower()} {token}"
                return secrets.compare_digest(given.encode(), self.expected.encode())
        return False


async def _send_json(send: Send, body: bytes) -> None:
    headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def install(
    api: FastAPI,
    candidates: list[tuple[APIRoute, PointAnswer]],
    backend: Backend,
    api_token: str | None,
) -> list[FastRoute]:
    """Answer ``candidates`` here, each only if FastAPI itself routes its path to it
    (an earlier route with an overlapping path, say the app's own, wins there, so
    it must win here too). Returns the routes taken."""
    taken = [FastRoute(route, answer) for route, answer in candidates if _routed_to(api, route)]
    if taken:
        api.add_middleware(PointQueries, routes=taken, backend=backend, api_token=api_token)
    return taken


def _routed_to(api: FastAPI, route: APIRoute) -> bool:
    """Whether FastAPI routes a GET of ``route``'s path (a sample key in it) to
    ``route``: the first route, in FastAPI's order, whose template matches it."""
    path = route.path.replace("{key}", "sample-key")
    for context in iter_route_contexts(api.router.routes):
        template = context.path
        methods = context.methods
        if template is None or (methods is not None and "GET" not in methods):
            continue
        if compile_path(template)[0].match(path):
            return context.original_route is route
    return False
