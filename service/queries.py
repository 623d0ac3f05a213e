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

from service.eventtime import MIN_WATERMARK, TimeWindow
from service.pipeline.windowed import RESULTS, RESULTS_BY_WINDOW
from service.runtime.engine import PipelineRuntime
from service.runtime.task import Task
from tables import catalog
from tables.codecs import key_prefix, window_key_range, window_prefix
from tables.keyed import state_table
from tables.store import PartitionStore, TableSpec
from tables.windows import key_state_table, window_table

KEY_STATE = key_state_table("keystate")


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


class OwnedElsewhereError(PartitionUnavailableError):
    """Another worker owns the key's partition: the API forwards the request there."""

    def __init__(self, partition: int, owner_url: str) -> None:
        super().__init__(
            f"partition {partition} is owned by the worker at {owner_url}", partition, 1
        )
        self.owner_url = owner_url


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
        owner = runtime.owner_of(partition)
        if owner is not None and owner != runtime.endpoint:
            raise OwnedElsewhereError(partition, owner)
        raise PartitionUnavailableError(
            f"partition {partition} has no owner yet (rebalancing)", partition, retry_after_s=1
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
    return _keyed(runtime, state_table(state), key, f"no {state!r} state for {key!r}")


def window_key_state(runtime: PipelineRuntime, key: str) -> StateValue:
    """A window pipeline's per-key state across windows (process-window functions)."""
    return _keyed(runtime, KEY_STATE, key, f"no data for {key!r}")


def _keyed(
    runtime: PipelineRuntime, table: TableSpec[str, Any], key: str, missing: str
) -> StateValue:
    partition, task, store = locate(runtime, key)
    value = store.get(table, key)
    if value is None:
        raise UnknownKeyError(missing)
    offsets = {tp.topic: o for tp, o in task.committed_offsets.items()}
    return StateValue(key, partition, value, offsets)


@dataclass(frozen=True)
class WindowTop:
    window: TimeWindow
    rows: list[dict[str, Any]]
    partitions: list[int]


def window_top(
    runtime: PipelineRuntime, window_start_ms: int | None, size_ms: int, n: int, field: str
) -> WindowTop:
    """The ``n`` results of one window with the largest ``field``, over the partitions
    this worker serves (``window_start_ms`` None: the newest window that closed)."""
    stores = [(p, runtime.stores.get(p)) for p in sorted(runtime.tasks)]
    if window_start_ms is None:
        if not runtime.tasks:
            raise PartitionUnavailableError("no partition is served here yet", -1, 1)
        closed = [t.logic.watermark_ms for t in runtime.tasks.values()]
        closed = [w for w in closed if w != MIN_WATERMARK]
        if not closed:
            raise UnknownKeyError("no window has closed yet: no records so far")
        newest_end = (max(closed) + 1) // size_ms * size_ms
        window_start_ms = newest_end - size_ms
    window = TimeWindow(window_start_ms, window_start_ms + size_ms)
    rows: list[dict[str, Any]] = []
    prefix = window_prefix(window)
    for _, store in stores:
        if store is not None:
            rows += [value for _, value in store.scan(RESULTS_BY_WINDOW, prefix, prefix + b"\xff")]
    rows.sort(key=lambda row: (-row[field], str(row)))
    return WindowTop(window, rows[:n], [p for p, _ in stores])


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


def table_names(runtime: PipelineRuntime) -> list[str]:
    """Tables with entries in any partition this worker serves."""
    names: set[str] = set()
    for partition in runtime.tasks:
        store = runtime.stores.get(partition)
        if store is not None:
            names.update(store.table_names())
    return sorted(names)


@dataclass(frozen=True)
class TablePage:
    key: str
    partition: int
    layout: str
    entries: list[catalog.Entry]
    next_from_ms: int | None
    watermark_ms: int | None
    committed_offsets: dict[str, int]


def table_entries(
    runtime: PipelineRuntime, table: str, key: str, from_ms: int, to_ms: int, limit: int
) -> TablePage:
    """``key``'s entries in any table (windows starting in ``[from_ms, to_ms)``).

    Raises:
        ValueError: the table is keyed by time, not by a record key.
    """
    view = catalog.view_of(table)
    partition, task, store = locate(runtime, key)
    entries = catalog.lookup(store, table, key, from_ms, to_ms, limit)
    if not entries and (view.layout == "by_key" or not catalog.has_key(store, table, key)):
        raise UnknownKeyError(f"no entry for {key!r} in table {table!r}")
    more = len(entries) > limit
    entries = entries[:limit]
    last = entries[-1].window if entries else None
    return TablePage(
        key=key,
        partition=partition,
        layout=view.layout,
        entries=entries,
        next_from_ms=last.start_ms + 1 if more and last is not None else None,
        watermark_ms=task.logic.watermark_ms,
        committed_offsets={tp.topic: o for tp, o in task.committed_offsets.items()},
    )


def table_keys(runtime: PipelineRuntime, table: str, limit: int) -> list[str]:
    """Up to ``limit`` keys of ``table`` over the partitions this worker serves.

    Raises:
        ValueError: the table is keyed by time, not by a record key.
    """
    found: set[str] = set()
    for partition in sorted(runtime.tasks):
        store = runtime.stores.get(partition)
        if store is not None:
            found.update(catalog.keys(store, table, limit))
    return sorted(found)[:limit]
