"""A stage's runtime as queries see it: the partitions its tasks serve, in this process.

A worker that serves its own API (tests, embedded use) answers queries from its
tasks' stores directly; the query plane reads the same stores from another process
(``service/plane/stages.py``). Both implement :class:`eddy.app.queries.ServedStage`.
"""

from __future__ import annotations

from eddy.app.queries import Freshness, ServedPartition
from eddy.eventtime import MIN_WATERMARK
from eddy.runtime.engine import PipelineRuntime
from eddy.runtime.task import Task


class RuntimeStage:
    """:class:`~eddy.app.queries.ServedStage` over a :class:`PipelineRuntime`."""

    def __init__(self, runtime: PipelineRuntime) -> None:
        self._runtime = runtime

    @property
    def partition_count(self) -> int:
        return self._runtime.partition_count

    @property
    def endpoint(self) -> str | None:
        return self._runtime.endpoint

    def restoring(self, partition: int) -> bool:
        runtime = self._runtime
        return partition in runtime.restoring or (
            partition not in runtime.tasks and not runtime.assigned_once
        )

    def serve(self, partition: int) -> ServedPartition | None:
        task = self._runtime.tasks.get(partition)
        store = self._runtime.stores.get(partition)
        if task is None or store is None or partition in self._runtime.restoring:
            return None
        return ServedPartition(partition, store, freshness(partition, task))

    def served(self) -> list[int]:
        runtime = self._runtime
        return sorted(p for p in runtime.tasks if p not in runtime.restoring)

    def owner_of(self, partition: int) -> str | None:
        return self._runtime.owner_of(partition)


def freshness(partition: int, task: Task) -> Freshness:
    """The task's committed offsets, and its watermark now (a commit interval at
    most ahead of the committed state)."""
    watermark = task.logic.watermark_ms
    return Freshness(
        partition,
        None if watermark == MIN_WATERMARK else watermark,
        {tp.topic: o for tp, o in task.committed_offsets.items()},
    )
