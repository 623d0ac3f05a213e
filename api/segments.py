"""Path parameters as the client sent them: a ``/`` percent-encoded (``%2F``) is
part of a segment, not a separator.

uvicorn hands the app the decoded path, where ``a%2Fb`` has become ``a/b``: a key
holding ``/`` then matched no route, or another one (``/sensors/a%2Fwindows``
answered sensor ``a``'s windows). So the app routes on the path with each segment
decoded but its ``%`` and ``/`` escaped again (``%25``, ``%2F``), and every
route's path parameters are decoded once matched. Any key is then one segment:
``/``, ``%``, spaces, non-ASCII, and ``.`` or ``..`` sent as ``%2E`` or
``%2E%2E`` (HTTP clients remove dot segments that are not encoded; the server
never does). A route matches exactly the requests it matched before, unless their
path holds ``%2F``.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from fastapi import FastAPI, Request
from starlette.types import ASGIApp, Receive, Scope, Send

_ESCAPED = re.compile("%2F|%25")
_DOTS = {b".": b"%2E", b"..": b"%2E%2E"}


def routed_path(raw_path: bytes) -> str:
    """The path to route on: each segment decoded, then its ``%`` and ``/``
    escaped, so that only the path's own ``/`` separate segments."""
    return "/".join(
        unquote(segment).replace("%", "%25").replace("/", "%2F")
        for segment in raw_path.decode("latin-1").split("/")
    )


def decoded(value: str) -> str:
    """A path parameter as the client meant it (what :func:`routed_path` escaped)."""
    if "%" not in value:
        return value
    return _ESCAPED.sub(lambda found: "/" if found.group() == "%2F" else "%", value)


def forwardable(raw_path: bytes) -> bytes:
    """``raw_path`` as sent, with ``.`` and ``..`` segments percent-encoded: an HTTP
    client would remove them, and this server reads them as the same keys."""
    if b"." not in raw_path:
        return raw_path
    return b"/".join(_DOTS.get(segment, segment) for segment in raw_path.split(b"/"))


# Set on a request whose path was rewritten: its path parameters are to be decoded.
_ROUTED = "eddy.routed_path"


class Segments:
    """ASGI middleware: the path routes match, as :func:`routed_path` makes it. A
    path without ``%`` needs nothing: decoding it changes nothing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw and b"%" in raw:
            scope["path"] = routed_path(raw)  # in place: outer middleware read its route
            scope[_ROUTED] = True
        await self.app(scope, receive, send)


async def decode_path_params(request: Request) -> None:
    """A dependency of every route (the app's): its path parameters decoded before
    the route reads them (FastAPI solves dependencies first). Async: FastAPI runs a
    plain function in a thread, a hop per request."""
    if request.scope.pop(_ROUTED, False):
        params: dict[str, Any] = request.scope.get("path_params", {})
        for name, value in params.items():
            if isinstance(value, str):
                params[name] = decoded(value)


def install(api: FastAPI) -> None:
    """Route ``api``'s requests by segment: outside any middleware that matches
    routes itself (the fast path), which must see the routed path too. ``api`` must
    have :func:`decode_path_params` as a dependency of every route."""
    api.add_middleware(Segments)
