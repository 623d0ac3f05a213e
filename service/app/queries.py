"""Read-only queries on a worker's committed state, for the REST API.

Queries read the committed RocksDB state only, never a checkpoint in progress:
an answer reflects what Kafka committed, so it cannot show a result that a
failure would roll back. What an app serves is declared by its agents (views:
an agent's window results, or a queryable state), so nothing here knows any
one agent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

from aiokafka.partitioner import murmur2

from service.app.plan import View
from service.app.reads import has_results, has_windows, state_value, window_rows
from service.eventtime import MIN_WATERMARK, TimeWindow
from service.pipeline.windowed import RESULTS, RESULTS_BY_WINDOW

if TYPE_CHECKING:
    from service.runtime.engine import PipelineRuntime
    from service.runtime.task import Task
from tables import catalog
from tables.codecs import decode_str, encode_str, encode_time, window_prefix
from tables.keyed import state_table
from tables.store import PartitionStore


class QueryError(Exception):
    """Base of errors a query answers with instead of data."""


class UnknownKeyError(QueryError):
    """No such agent, view or key (404)."""


class NoDataYetError(QueryError):
    """The key is known but has no result yet (its windows are still open)."""


class PartitionUnavailableError(QueryError):
    """The key's partition is recovering or owned by another worker; retry later."""

    def __init__(self, message: str, partition: int, retry_after_s: int) -> None:
        super().__init__(message)
        self.partition = partition
        self.retry_after_s = retry_after_s


class OwnedElsewhereError(PartitionUnavailableError):
    """Another worker owns the key's partition: the API forwards the request there."""

    def __init__(self, partition: int, owner_url: str) -> None:
        super().__init__(
            f"partition {partition} is owned by the worker at {owner_url}", partition, 1
        )
        self.owner_url = owner_url


@dataclass(frozen=True)
class Freshness:
    """How fresh an answer from one partition's committed state is."""

    partition: int
    watermark_ms: int | None
    committed_offsets: dict[str, int]


@dataclass(frozen=True)
class WindowPage:
    key: str
    windows: list[dict[str, Any]]
    next_from_ms: int | None
    freshness: Freshness


@dataclass(frozen=True)
class StateValue:
    key: str
    value: Any
    freshness: Freshness


@dataclass(frozen=True)
class Owner:
    partition: int
    url: str | None
    here: bool


def partition_for(key: str, partitions: int) -> int:
    """Kafka's default partitioner: the partition a keyed producer chose."""
    hashed: int = murmur2(key.encode())
    return (hashed & 0x7FFFFFFF) % partitions


def owner_of(runtime: PipelineRuntime, key: str) -> Owner:
    """Which worker owns ``key`` (Kafka Streams' ``queryMetadataForKey``)."""
    if runtime.partition_count == 0:
        raise PartitionUnavailableError("the worker is starting", -1, 1)
    partition = partition_for(key, runtime.partition_count)
    here = partition in runtime.tasks
    url = runtime.endpoint if here else runtime.owner_of(partition)
    return Owner(partition, url, here)


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


def freshness(partition: int, task: Task) -> Freshness:
    watermark = task.logic.watermark_ms
    return Freshness(
        partition,
        None if watermark == MIN_WATERMARK else watermark,
        {tp.topic: o for tp, o in task.committed_offsets.items()},
    )


def windows(
    runtime: PipelineRuntime,
    key: str,
    from_ms: int,
    to_ms: int,
    limit: int,
    *,
    newest_first: bool = False,
) -> WindowPage:
    """Results of ``key``'s windows starting in ``[from_ms, to_ms)``, oldest first
    (a page continues at ``next_from_ms``), or the newest ``limit`` first.

    Raises:
        UnknownKeyError: the agent has never seen ``key`` (in its retention).
        NoDataYetError: ``key`` has open windows but no result yet.
    """
    partition, task, store = locate(runtime, key)
    rows = window_rows(store, key, from_ms, to_ms, limit + 1, newest_first=newest_first)
    if not rows and not has_results(store, key):
        if has_windows(store, key):
            raise NoDataYetError(f"key {key!r} has no closed window yet")
        raise UnknownKeyError(f"no data for key {key!r}")
    more = len(rows) > limit
    rows = rows[:limit]
    return WindowPage(
        key=key,
        windows=[value for _, value in rows],
        next_from_ms=rows[-1][0].start_ms + 1 if more and not newest_first else None,
        freshness=freshness(partition, task),
    )


def state(runtime: PipelineRuntime, view: View, key: str) -> StateValue:
    """``key``'s committed value of a queryable state, typed as declared."""
    assert view.descriptor is not None
    partition, task, store = locate(runtime, key)
    value = state_value(store, view.descriptor, key)
    if value is None:
        raise UnknownKeyError(f"no {view.descriptor.name!r} state for key {key!r}")
    return StateValue(key, value, freshness(partition, task))


def local_keys(
    runtime: PipelineRuntime, view: View, prefix: str, after: str | None, limit: int
) -> tuple[list[str], list[int]]:
    """Up to ``limit`` keys of a view starting with ``prefix`` and ordered after
    ``after``, over the partitions this worker serves; and those partitions."""
    found: list[str] = []
    partitions = sorted(p for p in runtime.tasks if p not in runtime.restoring)
    for partition in partitions:
        store = runtime.stores.get(partition)
        if store is not None:
            found += _keys(store, view, prefix, after, limit)
    found.sort(key=key_order(view))
    return found[:limit], partitions


def key_order(view: View) -> Callable[[str], Any]:
    """Keys in the order their table stores them (window tables: by length first)."""
    if view.kind == "windows":
        return lambda key: (len(key.encode()), key)
    return lambda key: key


def _keys(
    store: PartitionStore, view: View, prefix: str, after: str | None, limit: int
) -> list[str]:
    if view.kind == "state":
        assert view.descriptor is not None
        table = state_table(view.descriptor.name)
        lower = (
            (after.encode() + b"\x00") if after is not None and after >= prefix else prefix.encode()
        )
        upper = _prefix_end(prefix.encode())
        return [k for k, _ in islice(store.scan(table, lower, upper), limit)]
    return _window_keys(store, prefix, after, limit)


def _window_keys(store: PartitionStore, prefix: str, after: str | None, limit: int) -> list[str]:
    """One seek per key of the results table (keys are stored length first)."""
    found: list[str] = []
    lower = b"" if after is None else encode_str(after) + b"\xff" * 16
    while len(found) < limit:
        first = next(iter(store.scan(RESULTS, lower)), None)
        if first is None:
            break
        (key, _), _ = first
        if key.startswith(prefix):
            found.append(key)
        lower = encode_str(key) + b"\xff" * 16
    return found


def _prefix_end(prefix: bytes) -> bytes | None:
    if not prefix:
        return None
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else None


def window_slice(
    runtime: PipelineRuntime, window_start_ms: int | None
) -> tuple[TimeWindow | None, list[dict[str, Any]], list[int]]:
    """Every key's result of one window, over the partitions served here: the
    window starting at ``window_start_ms``, or the newest with a result."""
    partitions = sorted(p for p in runtime.tasks if p not in runtime.restoring)
    stores = [s for p in partitions if (s := runtime.stores.get(p)) is not None]
    window = _newest_window(stores) if window_start_ms is None else None
    if window_start_ms is not None:
        lower = encode_time(window_start_ms)
        upper = encode_time(window_start_ms + 1)
        for store in stores:
            first = next(iter(store.scan(RESULTS_BY_WINDOW, lower, upper)), None)
            if first is not None:
                window = first[0][0]
                break
    if window is None:
        return None, [], partitions
    prefix = window_prefix(window)
    rows = [
        v for store in stores for _, v in store.scan(RESULTS_BY_WINDOW, prefix, prefix + b"\xff")
    ]
    return window, rows, partitions


def _newest_window(stores: list[PartitionStore]) -> TimeWindow | None:
    newest = [last[0][0] for s in stores if (last := s.last(RESULTS_BY_WINDOW)) is not None]
    return max(newest) if newest else None


def decode_key(raw: bytes) -> str:
    return decode_str(raw)[0]


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
    layout: str
    entries: list[catalog.Entry]
    next_from_ms: int | None
    freshness: Freshness


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
        layout=view.layout,
        entries=entries,
        next_from_ms=last.start_ms + 1 if more and last is not None else None,
        freshness=freshness(partition, task),
    )
