"""Queries for an app's own REST routes (``app.router``), like Faust's pages.

.. code-block:: python

    @app.router.get("/users/{key}/today")
    async def today(key: str, queries: Queries) -> Summary:
        page = queries.windows("clicks_per_minute", key, newest_first=True, limit=60)
        ...

A query for a key another worker owns raises an error the API turns into a
forward to that worker (the same request, answered there), or a 503 while the
key's partition is restoring, exactly as for the generated routes.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import Depends, Request
from pydantic import BaseModel, Field

from eddy.app.queries import StateValue, WindowPage

MAX_TIME_MS = 2**62


class Problem(BaseModel):
    """An error, as every error response carries it (RFC 9457)."""

    type: str = "about:blank"
    title: str = Field(description="The HTTP status's phrase.")
    status: int
    detail: str = Field(description="What went wrong, for a person.")
    instance: str = Field(description="The request path.")
    partition: int | None = Field(None, description="503: the partition that is unavailable.")
    owner: str | None = Field(
        None, description="503: the worker owning the partition, that could not be asked."
    )
    reason: str | None = Field(
        None, description="503: why the owner could not be asked (e.g. 'connect timed out')."
    )


# A route reading state with Queries answers these errors (the API turns a
# query's exceptions into them); declare them so the schema tells the truth:
# ``@app.router.get(path, response_model=..., responses=QUERY_ERRORS)``.
QUERY_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "No such agent, view or key"},
    409: {"model": Problem, "description": "The key is known but has no result yet"},
    503: {
        "model": Problem,
        "description": "The key's partition is restoring or moving, or its owner cannot be reached",
    },
}


class _Backend(Protocol):
    def windows(
        self,
        agent: str,
        key: str,
        from_ms: int,
        to_ms: int,
        limit: int,
        *,
        newest_first: bool = False,
    ) -> WindowPage: ...

    def state(self, agent: str, state: str, key: str) -> StateValue: ...


class AppQueries:
    """Reads of the agents' committed state, for custom routes."""

    def __init__(self, backend: _Backend) -> None:
        self._backend = backend

    def windows(
        self,
        agent: str,
        key: str,
        *,
        from_ms: int = 0,
        to_ms: int = MAX_TIME_MS,
        limit: int = 100,
        newest_first: bool = False,
    ) -> WindowPage:
        """``key``'s window results of ``agent`` starting in ``[from_ms, to_ms)``."""
        return self._backend.windows(agent, key, from_ms, to_ms, limit, newest_first=newest_first)

    def state(self, agent: str, state: str, key: str) -> Any:
        """``key``'s value of ``agent``'s queryable state ``state``."""
        return self._backend.state(agent, state, key).value


def _queries(request: Request) -> AppQueries:
    return AppQueries(request.app.state.backend)


Queries = Annotated[AppQueries, Depends(_queries)]
