"""Reading an agent's committed state from one partition's store: what the REST
queries and the test driver both read, so a test sees what a query would."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

from eddy.eventtime.descriptors import StateDescriptor
from eddy.eventtime.windows import TimeWindow
from eddy.pipeline.windowed import RESULTS
from eddy.tables.codecs import key_prefix, window_key_range
from eddy.tables.keyed import state_table
from eddy.tables.store import PartitionStore
from eddy.tables.windows import window_table

OPEN_WINDOWS = window_table("windows")


def window_rows(
    store: PartitionStore,
    key: str,
    from_ms: int,
    to_ms: int,
    limit: int,
    *,
    newest_first: bool = False,
) -> list[tuple[TimeWindow, dict[str, Any]]]:
    """Up to ``limit`` results of ``key``'s windows starting in ``[from_ms, to_ms)``,
    oldest first (or newest first)."""
    lower, upper = window_key_range(key, from_ms, to_ms)
    rows = islice(store.scan(RESULTS, lower, upper, reverse=newest_first), limit)
    return [(window, value) for (_, window), value in rows]


def has_results(store: PartitionStore, key: str) -> bool:
    """Whether ``key`` has any queryable window result."""
    prefix = key_prefix(key)
    return _any(store.scan(RESULTS, prefix, prefix + b"\xff" * 16))


def has_windows(store: PartitionStore, key: str) -> bool:
    """Whether ``key`` has any result, or a window still open (data, not yet closed)."""
    prefix = key_prefix(key)
    upper = prefix + b"\xff" * 16
    return has_results(store, key) or _any(store.scan(OPEN_WINDOWS, prefix, upper))


def state_value(store: PartitionStore, descriptor: StateDescriptor[Any], key: str) -> Any | None:
    """``key``'s committed value of a typed state, as its type (None: absent)."""
    stored = store.get(state_table(descriptor.name), key)
    if stored is None:
        return None
    if descriptor.ttl is not None:
        stored = stored["value"]  # expiry is applied by the function's reads, not here
    return descriptor.from_json(stored)


def _any(items: Iterator[Any]) -> bool:
    return next(items, None) is not None
