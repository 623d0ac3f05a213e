"""RocksDB-backed implementations of the event-time core's state protocols."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from service.eventtime import Timer, TimeWindow, WindowEntry
from tables.codecs import (
    decode_empty,
    decode_json,
    decode_timer,
    decode_window_key,
    encode_empty,
    encode_json,
    encode_timer,
    encode_window_key,
)
from tables.store import PartitionStore, PartitionTransaction, TableSpec

WindowKey = tuple[str, TimeWindow]


def _encode_entry(entry: WindowEntry) -> bytes:
    return encode_json([entry.accumulator, entry.fired])


def _decode_entry(raw: bytes) -> WindowEntry:
    accumulator, fired = decode_json(raw)
    return WindowEntry(accumulator, fired)


def window_table(name: str) -> TableSpec[WindowKey, WindowEntry]:
    """Accumulators of open windows, keyed ``(key, window)``."""
    return TableSpec(name, encode_window_key, decode_window_key, _encode_entry, _decode_entry)


def timer_table(name: str) -> TableSpec[Timer, bool]:
    """Registered timers; the key is the whole timer, sorted by time."""
    return TableSpec(name, encode_timer, decode_timer, encode_empty, decode_empty)


def results_table(name: str) -> TableSpec[WindowKey, dict[str, Any]]:
    """Emitted window results, kept for queries, keyed ``(key, window)``."""
    return TableSpec(name, encode_window_key, decode_window_key, encode_json, decode_json)


class StoredWindowState:
    """:class:`service.eventtime.WindowState` over a partition transaction."""

    def __init__(self, txn: PartitionTransaction, table: TableSpec[WindowKey, WindowEntry]):
        self._txn = txn
        self._table = table

    def get_window(self, key: str, window: TimeWindow) -> WindowEntry | None:
        entry = self._txn.get(self._table, (key, window))
        # Values in the transaction are live objects; the operator mutates the copy
        # it gets and puts it back, so give it its own.
        return None if entry is None else WindowEntry(entry.accumulator, entry.fired)

    def put_window(self, key: str, window: TimeWindow, entry: WindowEntry) -> None:
        self._txn.put(self._table, (key, window), entry)

    def delete_window(self, key: str, window: TimeWindow) -> None:
        self._txn.delete(self._table, (key, window))


class StoredTimers:
    """:class:`service.eventtime.TimerStore`: writes go to the transaction, loads
    read the committed store (a reload follows a restore or an abort)."""

    def __init__(
        self, store: PartitionStore, txn: PartitionTransaction, table: TableSpec[Timer, bool]
    ):
        self._store = store
        self._txn = txn
        self._table = table

    def put_timer(self, timer: Timer) -> None:
        self._txn.put(self._table, timer, True)

    def delete_timer(self, timer: Timer) -> None:
        self._txn.delete(self._table, timer)

    def load_timers(self) -> Iterable[Timer]:
        return [timer for timer, _ in self._store.scan(self._table)]
