"""Any table of a partition store, read by name: the generic REST view.

Pipelines name their tables by role (``results``, ``windows``, ``state.<name>``,
``keystate``, ``sessions``, timers); the name says which codecs read it, so the
view needs no registry that could drift from the pipelines. Timer tables and
``results.by_window`` are keyed by time, not by a record key: they are listed but
not looked up by key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, Literal

from eddy.eventtime import TimeWindow
from eddy.tables.codecs import key_prefix, window_key_range
from eddy.tables.keyed import state_table
from eddy.tables.store import PartitionStore, TableSpec
from eddy.tables.windows import key_state_table, results_table, session_table, window_table

Layout = Literal["by_key", "by_key_and_window", "by_time"]


@dataclass(frozen=True)
class TableView:
    name: str
    layout: Layout


def view_of(name: str) -> TableView:
    """How a table named ``name`` is keyed."""
    if name in ("results", "windows") or name.endswith((".windows", ".results", ".expires_at")):
        return TableView(name, "by_key_and_window")
    by_key = ("keystate", "sessions", ".per_key")
    if name.startswith("state.") or name.endswith(by_key) or name == "meta":
        return TableView(name, "by_key")
    return TableView(name, "by_time")  # timers, results.by_window, results.expiry


@dataclass(frozen=True)
class Entry:
    window: TimeWindow | None
    value: Any


def lookup(
    store: PartitionStore, name: str, key: str, from_ms: int, to_ms: int, limit: int
) -> list[Entry]:
    """Entries of ``key`` in table ``name`` (windows starting in ``[from_ms, to_ms)``
    for window tables), oldest first, at most ``limit + 1`` (to tell if more exist).

    Raises:
        ValueError: the table is not keyed by a record key.
    """
    view = view_of(name)
    if view.layout == "by_key":
        value = store.get(_by_key_spec(name), key)
        return [] if value is None else [Entry(None, jsonable(value))]
    if view.layout == "by_key_and_window":
        spec = _windowed_spec(name)
        lower, upper = window_key_range(key, from_ms, to_ms)
        rows: Iterator[tuple[tuple[str, TimeWindow], Any]] = store.scan(spec, lower, upper)
        return [Entry(window, jsonable(value)) for (_, window), value in islice(rows, limit + 1)]
    raise ValueError(f"table {name!r} is keyed by time, not by a record key")


def has_key(store: PartitionStore, name: str, key: str) -> bool:
    """Whether ``key`` has any entry in a window table (to tell 404 from an empty page)."""
    spec = _windowed_spec(name)
    prefix = key_prefix(key)
    return any(True for _ in store.scan(spec, prefix, prefix + b"\xff" * 16))


def _windowed_spec(name: str) -> TableSpec[tuple[str, TimeWindow], Any]:
    if name.endswith("windows"):
        return window_table(name)
    return results_table(name)


def _by_key_spec(name: str) -> TableSpec[str, Any]:
    if name.endswith("sessions"):
        return session_table(name)
    if name.startswith("state."):
        return state_table(name.removeprefix("state."))
    return key_state_table(name)


def jsonable(value: Any) -> Any:
    """State values as JSON: window entries and windows become objects."""
    if isinstance(value, TimeWindow):
        return {"start_ms": value.start_ms, "end_ms": value.end_ms}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value


def keys(store: PartitionStore, name: str, limit: int) -> list[str]:
    """Up to ``limit`` distinct record keys of table ``name``, in key order.

    Raises:
        ValueError: the table is keyed by time, not by a record key.
    """
    view = view_of(name)
    if view.layout == "by_key":
        return [key for key, _ in islice(store.scan(_by_key_spec(name)), limit)]
    if view.layout == "by_key_and_window":
        spec = _windowed_spec(name)
        found: list[str] = []
        lower = b""
        # One seek per key: skip past every window of the key just seen.
        while len(found) < limit:
            first = next(iter(store.scan(spec, lower)), None)
            if first is None:
                break
            (key, _), _ = first
            found.append(key)
            lower = key_prefix(key) + b"\xff" * 16
        return found
    raise ValueError(f"table {name!r} is keyed by time, not by a record key")
