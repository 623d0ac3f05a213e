"""Keyed value state of any pipeline, by pipeline, state name and key."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from api.deps import BackendDep

router = APIRouter(prefix="/pipelines", tags=["state"])

Name = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._-]+$")]


class KeyedValue(BaseModel):
    pipeline: str
    state: str
    key: str
    value: Any
    partition: int
    served_by: str
    committed_offsets: dict[str, int] = Field(
        description="Input offsets the answer reflects (committed state only)."
    )


@router.get(
    "/{pipeline}/state/{state}/keys/{key}",
    response_model=KeyedValue,
    responses={
        404: {"description": "Unknown pipeline, state or key"},
        503: {"description": "The key's partition is recovering or owned elsewhere"},
    },
)
async def keyed_value(
    backend: BackendDep,
    pipeline: Name,
    state: Name,
    key: Annotated[str, Path(min_length=1, max_length=200)],
) -> KeyedValue:
    found = backend.state_value(pipeline, state, key)
    return KeyedValue(
        pipeline=pipeline,
        state=state,
        key=key,
        value=found.value,
        partition=found.partition,
        served_by=backend.worker_id,
        committed_offsets=found.committed_offsets,
    )
