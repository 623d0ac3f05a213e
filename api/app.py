"""The FastAPI application factory; a worker serves it in its own event loop."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import Depends, FastAPI, Request, Response

from api import errors, forward
from api.auth import require_token
from api.backend import Backend
from api.routes import (
    dashboard,
    health,
    jobs,
    metrics,
    pipelines,
    savepoints,
    sensors,
    snapshots,
    state,
    tables,
)

# (route template, method, status, seconds): the worker records it in Prometheus.
Observe = Callable[[str, str, int, float], None]


def create_app(
    backend: Backend, api_token: str | None = None, observe: Observe | None = None
) -> FastAPI:
    app = FastAPI(
        title="Eddy",
        summary="Queries on the live state of Eddy's stream processing pipelines.",
        version="0.1.0",
    )
    app.state.backend = backend
    app.state.api_token = api_token
    errors.install(app)
    forward.install(app, backend.worker_id)
    # Probes stay open: Kubernetes does not send tokens. The dashboard page is
    # static; its requests to the API carry the token.
    app.include_router(health.router)
    app.include_router(dashboard.router)
    guarded = [Depends(require_token)]
    for module in (metrics, sensors, state, tables, pipelines, snapshots, savepoints):
        app.include_router(module.router, dependencies=guarded)
    app.include_router(jobs.router, dependencies=guarded)
    if observe is not None:
        _time_requests(app, observe)
    return app


def _time_requests(app: FastAPI, observe: Observe) -> None:
    @app.middleware("http")
    async def timed(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        # The route's template, not the URL: one series per route, not per key.
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        observe(path, request.method, response.status_code, time.perf_counter() - started)
        return response
