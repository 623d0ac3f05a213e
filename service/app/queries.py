"""Read-only queries on a worker's committed state, for the REST API.

Queries read the committed RocksDB state only, never a checkpoint in progress:
an answer reflects what Kafka committed, so it cannot show a result that a
failure would roll back. What an app serves is declared by its agents (views:
an agent's window results, or a queryable state), so nothing here knows any
one agent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka.partitioner import murmur2

from eddy.app.plan import View
from eddy.app.reads import has_results, has_windows, state_value, window_rows
from eddy.tables import catalog
from eddy.tables.codecs import decode_str
from eddy.tables.store import PartitionStore


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


def _confirmed() -> None:
    """What was read from an ingest process's own store needs no confirming."""


@dataclass(frozen=True)
class ServedPartition:
    """A partition this worker answers for: its committed state and how fresh it is."""

    partition: int
    store: PartitionStore
    freshness: Freshness
    # Called after reading: raises PartitionUnavailableError if the partition was
    # reopened meanwhile, so what was read may not be its committed state (the
    # query plane reads stores another process writes: service/plane/stages.py).
    confirm: Callable[[], None] = field(default=_confirmed, compare=False)


class ServedStage(Protocol):
    """One stage's partitions as queries see them, wherever their state lives: in
    the worker's own tasks (:class:`RuntimeStage`) or in the ingest processes the
    query plane reads (``service/plane/stages.py``)."""

    @property
    def partition_count(self) -> int:
        """Partitions of the stage's inputs; 0 while not known yet (starting)."""
        ...

    @property
    def endpoint(self) -> str | None:
        """This worker's API as the group knows it."""
        ...

    def restoring(self, partition: int) -> bool:
        """Whether ``partition`` is being restored here, or nothing is assigned yet."""
        ...

    def serve(self, partition: int) -> ServedPartition | None:
        """``partition``'s committed state if this worker serves it now."""
        ...

    def served(self) -> list[int]:
        """The partitions served here now (restored), in order."""
        ...

    def owner_of(self, partition: int) -> str | None:
        """The API of the worker owning ``partition``, as of the last rebalance."""
        ...


def owner_of(stage: ServedStage, key: str) -> Owner:
    """Which worker owns ``key`` (Kafka Streams' ``queryMetadataForKey``)."""
    if stage.partition_count == 0:
        raise PartitionUnavailableError("the worker is starting", -1, 1)
    partition = partition_for(key, stage.partition_count)
    here = partition in stage.served()
    url = stage.endpoint if here else stage.owner_of(partition)
    return Owner(partition, url, here)


def remote_owners(stage: ServedStage) -> dict[str, list[int]]:
    """Other workers' endpoints and the partitions of ``stage`` they own; a
    partition without a known owner is listed under ''."""
    served = set(stage.served())
    owners: dict[str, list[int]] = {}
    for partition in range(stage.partition_count):
        if partition in served:
            continue
        owner = stage.owner_of(partition) or ""
        if owner != stage.endpoint:
            owners.setdefault(owner, []).append(partition)
    return owners


def locate(stage: ServedStage, key: str) -> ServedPartition:
    """The partition of ``key`` and its committed state, if this worker serves it now.

    Raises:
        PartitionUnavailableError: it is restoring here, or has no owner yet.
        OwnedElsewhereError: another worker owns it (the API forwards the request).
    """
    if stage.partition_count == 0:
        raise PartitionUnavailableError("the worker is starting", -1, 1)
    partition = partition_for(key, stage.partition_count)
    if stage.restoring(partition):
        raise PartitionUnavailableError(
            f"partition {partition} is being restored", partition, retry_after_s=2
        )
    served = stage.serve(partition)
    if served is None:
        owner = stage.owner_of(partition)
        if owner is not None and owner != stage.endpoint:
            raise OwnedElsewhereError(partition, owner)
        raise PartitionUnavailableError(
            f"partition {partition} has no owner yet (rebalancing)", partition, retry_after_s=1
        )
    return served


def windows(
    stage: ServedStage,
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
    served = locate(stage, key)
    store = served.store
    rows = window_rows(store, key, from_ms, to_ms, limit + 1, newest_first=newest_first)
    found = bool(rows) or has_results(store, key)
    open_only = not found and has_windows(store, key)
    served.confirm()
    if not found:
        if open_only:
            raise NoDataYetError(f"key {key!r} has no closed window yet")
        raise UnknownKeyError(f"no data for key {key!r}")
    more = len(rows) > limit
    rows = rows[:limit]
    return WindowPage(
        key=key,
        windows=[value for _, value in rows],
        next_from_ms=rows[-1][0].start_ms + 1 if more and not newest_first else None,
        freshness=served.freshness,
    )


def state(stage: ServedStage, view: View, key: str) -> StateValue:
    """``key``'s committed value of a queryable state, typed as declared."""
    assert view.descriptor is not None
    served = locate(stage, key)
    value = state_value(served.store, view.descriptor, key)
    served.confirm()
    if value is None:
        raise UnknownKeyError(f"no {view.descriptor.name!r} state for key {key!r}")
    return StateValue(key, value, served.freshness)


def each_served(stage: ServedStage) -> list[ServedPartition]:
    """The partitions ``stage`` serves now, with their committed state."""
    return [s for p in stage.served() if (s := stage.serve(p)) is not None]


def decode_key(raw: bytes) -> str:
    return decode_str(raw)[0]


def table_names(stage: ServedStage) -> list[str]:
    """Tables with entries in any partition this worker serves."""
    names: set[str] = set()
    for served in each_served(stage):
        names.update(served.store.table_names())
    return sorted(names)


@dataclass(frozen=True)
class TablePage:
    key: str
    layout: str
    entries: list[catalog.Entry]
    next_from_ms: int | None
    freshness: Freshness


def table_entries(
    stage: ServedStage, table: str, key: str, from_ms: int, to_ms: int, limit: int
) -> TablePage:
    """``key``'s entries in any table (windows starting in ``[from_ms, to_ms)``).

    Raises:
        ValueError: the table is keyed by time, not by a record key.
    """
    view = catalog.view_of(table)
    served = locate(stage, key)
    store = served.store
    entries = catalog.lookup(store, table, key, from_ms, to_ms, limit)
    known = bool(entries) or (view.layout != "by_key" and catalog.has_key(store, table, key))
    served.confirm()
    if not known:
        raise UnknownKeyError(f"no entry for {key!r} in table {table!r}")
    more = len(entries) > limit
    entries = entries[:limit]
    last = entries[-1].window if entries else None
    return TablePage(
        key=key,
        layout=view.layout,
        entries=entries,
        next_from_ms=last.start_ms + 1 if more and last is not None else None,
        freshness=served.freshness,
    )
