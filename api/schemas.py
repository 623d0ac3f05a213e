"""Response schemas: what clients can rely on (they appear in OpenAPI at /docs)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from eddy.app.queries import Freshness as Fresh


class Health(BaseModel):
    status: Literal["ok"] = Field(description="Not live is a 503 problem body instead.")
    worker_id: str


class Readiness(BaseModel):
    ready: bool
    worker_id: str
    stages: dict[str, dict[str, object]] = Field(
        description="Per stage running here: its agent, ready, partitions, restoring."
    )


class Freshness(BaseModel):
    served_by: str = Field(description="The worker that answered.")
    partition: int = Field(description="The key's partition.")
    watermark_ms: int | None = Field(
        description="Event-time watermark of the partition (null before its first record)."
    )
    committed_offsets: dict[str, int] = Field(
        description="Input offsets the answer reflects (committed state only)."
    )

    @classmethod
    def of(cls, served_by: str, fresh: Fresh) -> Freshness:
        """How fresh an answer from one partition's committed state is."""
        return cls(
            served_by=served_by,
            partition=fresh.partition,
            watermark_ms=fresh.watermark_ms,
            committed_offsets=fresh.committed_offsets,
        )
