"""The FastAPI application factory; a worker serves it in its own event loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from eddy.api import errors, fastpath, forward, segments
from eddy.api.auth import require_token
from eddy.api.backend import Backend
from eddy.api.errors import PROBLEM_RESPONSES
from eddy.api.fastpath import PointAnswer
from eddy.api.routes import agents, dashboard, health, jobs, metrics, snapshots, tables

if TYPE_CHECKING:
    from eddy.app.app import App

# (route template, method, status, seconds): the worker records it in Prometheus.
Observe = Callable[[str, str, int, float], None]


def create_app(
    backend: Backend,
    api_token: str | None = None,
    observe: Observe | None = None,
    app: App | None = None,
    *,
    fast_point_queries: bool = True,
) -> FastAPI:
    """The worker's API: generic routes, every agent's typed views, and the routes
    and aliases of ``app`` (the user's app). ``fast_point_queries=False`` leaves every
    request to FastAPI (api/fastpath.py; what its tests and benchmark compare with)."""
    from eddy import __version__

    api = FastAPI(
        title="Eddy" if app is None else f"Eddy: {app.name}",
        summary="Queries on the live state of an Eddy app's agents.",
        version=__version__,
        # Every error is a JSON problem (RFC 9457): declared once, for every route.
        responses={status: PROBLEM_RESPONSES[status] for status in (422, 500)},
        # A key holding '/' is one segment: api/segments.py.
        dependencies=[Depends(segments.decode_path_params)],
    )
    _install(api, backend, api_token, observe, app, fast_point_queries)
    generate = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            api.openapi_schema = errors.problem_media_type(generate())
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
    return api


def _install(
    app_api: FastAPI,
    backend: Backend,
    api_token: str | None,
    observe: Observe | None,
    user_app: App | None,
    fast_point_queries: bool,
) -> None:
    app = app_api
    app.state.backend = backend
    app.state.api_token = api_token
    errors.install(app)
    forward.install(app, backend.worker_id)
    # Probes stay open: Kubernetes does not send tokens. The dashboard page is
    # static; its requests to the API carry the token.
    app.include_router(health.router)
    app.include_router(dashboard.router)
    guarded = [Depends(require_token)]
    unauthorized: dict[int | str, dict[str, Any]] = {401: PROBLEM_RESPONSES[401]}
    for module in (metrics, agents, tables, snapshots, jobs):
        app.include_router(module.router, dependencies=guarded, responses=unauthorized)
    app.include_router(snapshots.internal, dependencies=guarded)
    installed = agents.install_views(app, backend.views(), guarded)
    points = [(installed.routes[path], answer) for path, answer in installed.point_answers.items()]
    if user_app is not None:
        app.include_router(user_app.router, dependencies=guarded, responses=unauthorized)
        points += _aliases(app, installed, user_app.aliases, guarded)
    if fast_point_queries:
        fastpath.install(app, points, backend, api_token)
    # Outside the fast path, which matches the routed path too.
    segments.install(app)
    # Added last, so it is outermost: the fast path's answers are timed too.
    if observe is not None:
        _time_requests(app, observe)


def _aliases(
    app: FastAPI, installed: agents.Installed, aliases: dict[str, str], guard: list[Any]
) -> list[tuple[APIRoute, PointAnswer]]:
    """Each alias path serves its target route (same handler, same schema). Returns
    the aliases of point queries, with the fast path's answer of their target."""
    points: list[tuple[APIRoute, PointAnswer]] = []
    for alias, target in aliases.items():
        route = installed.routes.get(target)
        if route is None:
            continue  # the target agent does not run on this worker
        app.add_api_route(
            alias,
            route.endpoint,
            response_model=route.response_model,
            responses={**route.responses, 401: PROBLEM_RESPONSES[401]},
            name=f"alias:{alias}",
            summary=f"Alias of {target}",
            tags=["aliases"],
            dependencies=guard,
        )
        added = app.router.routes[-1]
        answer = installed.point_answers.get(target)
        if answer is not None and isinstance(added, APIRoute):
            points.append((added, answer))
    return points


def _time_requests(app: FastAPI, observe: Observe) -> None:
    app.add_middleware(TimedRequests, observe=observe)


class TimedRequests:
    """Observes each HTTP request's route, status and duration. A plain ASGI
    middleware: Starlette's ``@app.middleware("http")`` runs every request through
    memory streams and a task group, which cost more CPU than a point query."""

    def __init__(self, app: ASGIApp, observe: Observe) -> None:
        self.app = app
        self.observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # the app raised before it answered

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            # The route's template, not the URL: one series per route, not per key.
            path = getattr(scope.get("route"), "path", "unmatched")
            self.observe(path, scope["method"], status, time.perf_counter() - started)
