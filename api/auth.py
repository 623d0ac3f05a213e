"""Optional bearer-token auth (``EDDY_API_TOKEN``) for everything but health probes."""

from __future__ import annotations

import secrets

from fastapi import Request
from starlette.exceptions import HTTPException


async def require_token(request: Request) -> None:
    """Raise 401 unless the request carries ``Authorization: Bearer <token>``."""
    expected: str | None = request.app.state.api_token
    if expected is None:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    # compare_digest: the time taken says nothing about how much of the token matched.
    if scheme.lower() != "bearer" or not secrets.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(
            401,
            "missing or wrong bearer token (header 'Authorization: Bearer <EDDY_API_TOKEN>')",
            headers={"WWW-Authenticate": "Bearer"},
        )
