"""Dependencies shared by routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from eddy.api.backend import Backend


async def get_backend(request: Request) -> Backend:
    backend: Backend = request.app.state.backend
    return backend


BackendDep = Annotated[Backend, Depends(get_backend)]
