"""Read-only queries on a worker's committed state, for the REST API.

Queries read the committed RocksDB state only, never a checkpoint in progress:
an answer reflects what Kafka committed, so it cannot show a result that a
failure would roll back.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Any

from aiokafka.partitioner import murmur2

from service.pipeline.windowed import RESULTS
from service.runtime.engine import PipelineRuntime
from service.runtime.task import Task
from tables.codecs import key_prefix, window_key_range
from tables.keyed import state_table
from tables.store import PartitionStore
from tables.windows import window_table


class QueryError(Exception):
    """Base of errors a query answers with instead of data."""


class UnknownKeyError(QueryError):
    pass


class PartitionUnavailableError(QueryError):
    """The key's partition is recovering or owned by another worker; retry later."""

    def __init__(self, message: str, partition: int, retry_after_s: int) -> None:
        super().__init__(message)
        self.partition = partition
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class WindowPage:
    key: str
    partition: int
    windows: list[dict[str, Any]]
    next_from_ms: int | None
    watermark_ms: int | None
    committed_offsets: dict[str, int]


def partition_for(key: str, partitions: int) -> int:
    """Kafka's default partitioner: the partition a keyed producer chose."""
    hashed: int = murmur2(key.encode())
    return (hashed & 0x7FFFFFFF) % partitions


def locate(runtime: PipelineRuntime, key: str) -> tuple[int, Task, PartitionStore]:
    """The partition of ``key`` and its task and store, if this worker serves it now."""
    if runtime.partition_count == 0:
        raise PartitionUnavailableError("the worker is starting", -1, 1)
    partition = partition_for(key, runtime.partition_count)
    task = runtime.tasks.get(partition)
    store = runtime.stores.get(partition)
    if partition in runtime.restoring or (task is None and not runtime.assigned_once):
        raise PartitionUnavailableError(
            f"partition {partition} is being restored", partition, retry_after_s=2
        )
    if task is None or store is None:
        raise PartitionUnavailableError(
            f"partition {partition} is owned by another worker", partition, retry_after_s=1
        )
    return partition, task, store


@dataclass(frozen=True)
class StateValue:
    key: str
    partition: int
    value: Any
    committed_offsets: dict[str, int]


def state_value(runtime: PipelineRuntime, state: str, key: str) -> StateValue:
    """The committed value of keyed value state ``state`` for ``key``."""
    partition, task, store = locate(runtime, key)
    value = store.get(state_table(state), key)
    if value is None:
        raise UnknownKeyError(f"no {state!r} state for {key!r}")
    offsets = {tp.topic: o for tp, o in task.committed_offsets.items()}
    return StateValue(key, partition, value, offsets)


def window_results(
    runtime: PipelineRuntime, key: str, from_ms: int, to_ms: int, limit: int
) -> WindowPage:
    """Results of windows of ``key`` starting in ``[from_ms, to_ms)``, oldest first."""
    partition, task, store = locate(runtime, key)
    lower, upper = window_key_range(key, from_ms, to_ms)
    prefix = key_prefix(key)
    rows = list(islice(store.scan(RESULTS, lower, upper), limit + 1))
    if not rows and not _known(store, prefix):
        raise UnknownKeyError(f"no data for {key!r}")
    more = len(rows) > limit
    rows = rows[:limit]
    return WindowPage(
        key=key,
        partition=partition,
        windows=[value for _, value in rows],
        next_from_ms=rows[-1][0][1].start_ms + 1 if more else None,
        watermark_ms=task.logic.watermark_ms,
        committed_offsets={tp.topic: o for tp, o in task.committed_offsets.items()},
    )


def _known(store: PartitionStore, prefix: bytes) -> bool:
    upper = prefix + b"\xff" * 16
    return any(True for _ in store.scan(RESULTS, prefix, upper)) or any(
        True for _ in store.scan(window_table("windows"), prefix, upper)
    )
