"""The FastAPI application factory; a worker serves it in its own event loop."""

from __future__ import annotations

from fastapi import FastAPI

from api import errors, forward
from api.backend import Backend
from api.routes import health, metrics, pipelines, sensors, state


def create_app(backend: Backend) -> FastAPI:
    app = FastAPI(
        title="Eddy",
        summary="Queries on the live state of Eddy's stream processing pipelines.",
        version="0.1.0",
    )
    app.state.backend = backend
    errors.install(app)
    forward.install(app, backend.worker_id)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(sensors.router)
    app.include_router(state.router)
    app.include_router(pipelines.router)
    return app
