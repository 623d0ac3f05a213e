"""Query and path parameters shared by routes, and the page-size check."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from eddy.api.deps import BackendDep
from eddy.api.errors import BadRequestError

MAX_TIME_MS = 2**62
Key = Annotated[str, Path(min_length=1, max_length=200, description="A record key.")]
FromMs = Annotated[int, Query(ge=0, le=MAX_TIME_MS, description="Window start >= this")]
ToMs = Annotated[int, Query(ge=0, le=MAX_TIME_MS, description="Window start < this")]
Limit = Annotated[int | None, Query(ge=1, description="Most windows (default 100)")]


def page_limit(backend: BackendDep, from_ms: int, to_ms: int, limit: int | None) -> int:
    """The page size to use, after checking the range and the limit (400 if wrong)."""
    if from_ms > to_ms:
        raise BadRequestError(f"from_ms ({from_ms}) must not be after to_ms ({to_ms})")
    limit = min(100, backend.max_results) if limit is None else limit
    if limit > backend.max_results:
        raise BadRequestError(f"limit {limit} is above the maximum of {backend.max_results}")
    return limit
