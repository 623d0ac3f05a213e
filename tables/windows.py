"""RocksDB-backed implementations of the event-time core's state protocols."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eddy.eventtime import Timer, TimeWindow, WindowEntry, timer_order
from eddy.tables.cache import DELETED, MISSING
from eddy.tables.codecs import (
    decode_empty,
    decode_json,
    decode_timer,
    decode_utf8,
    decode_window_first,
    decode_window_key,
    encode_empty,
    encode_json,
    encode_timer,
    encode_utf8,
    encode_window_first,
    encode_window_key,
)
from eddy.tables.store import PartitionTransaction, TableSpec

WindowKey = tuple[str, TimeWindow]


def _encode_entry(entry: WindowEntry) -> bytes:
    return encode_json([entry.contents, entry.fired, entry.trigger, entry.state])


def _decode_entry(raw: bytes) -> WindowEntry:
    contents, fired, trigger, state = decode_json(raw)
    return WindowEntry(contents, fired, trigger, state)


def _reviving(revive: Callable[[Any], Any]) -> Callable[[bytes], WindowEntry]:
    """A decoder for windows that keep their elements (``[ts, value]`` pairs):
    each value comes back as its type (a model, not the dict JSON gives)."""

    def decode(raw: bytes) -> WindowEntry:
        entry = _decode_entry(raw)
        if entry.contents is not None:
            entry.contents = [[ts, revive(value)] for ts, value in entry.contents]
        return entry

    return decode


def _encode_windows(windows: list[TimeWindow]) -> bytes:
    return encode_json([[w.start_ms, w.end_ms] for w in windows])


def _decode_windows(raw: bytes) -> list[TimeWindow]:
    return [TimeWindow(start, end) for start, end in decode_json(raw)]


def window_table(
    name: str, revive: Callable[[Any], Any] | None = None
) -> TableSpec[WindowKey, WindowEntry]:
    """Open windows (an accumulator, or the elements), keyed ``(key, window)``."""
    decode = _decode_entry if revive is None else _reviving(revive)
    return TableSpec(name, encode_window_key, decode_window_key, _encode_entry, decode)


def session_table(name: str) -> TableSpec[str, list[TimeWindow]]:
    """Each key's open session windows (merging assigners only)."""
    return TableSpec(name, encode_utf8, decode_utf8, _encode_windows, _decode_windows)


def key_state_table(name: str) -> TableSpec[str, dict[str, Any]]:
    """Per-key state of process-window functions, across windows."""
    return TableSpec(name, encode_utf8, decode_utf8, encode_json, decode_json)


def timer_table(name: str) -> TableSpec[Timer, bool]:
    """Registered timers; the key is the whole timer, sorted by time."""
    return TableSpec(name, encode_timer, decode_timer, encode_empty, decode_empty)


def results_table(name: str) -> TableSpec[WindowKey, dict[str, Any]]:
    """Emitted window results, kept for queries, keyed ``(key, window)``."""
    return TableSpec(name, encode_window_key, decode_window_key, encode_json, decode_json)


def results_by_window_table(name: str) -> TableSpec[tuple[TimeWindow, str], dict[str, Any]]:
    """The same results keyed ``(window, key)``: one window's results scan together
    (top-N per window, dashboards)."""
    return TableSpec(name, encode_window_first, decode_window_first, encode_json, decode_json)


class StoredWindowState:
    """:class:`eddy.eventtime.WindowState` over a partition transaction.

    Open windows and sessions go through the transaction's write-back cache: they
    are read on nearly every record and deleted when the window is cleaned up, so
    the cache holds just the open ones. Entries are handed out live: the operator
    always puts an entry back after changing it, and sharing saves a copy per
    element.
    """

    def __init__(
        self,
        txn: PartitionTransaction,
        prefix: str = "",
        revive: Callable[[Any], Any] | None = None,
    ) -> None:
        self._txn = txn
        windows = txn.cached(window_table(f"{prefix}windows", revive))
        self._sessions = txn.cached(session_table(f"{prefix}sessions"))
        self._key_state = key_state_table(f"{prefix}keystate")
        # Bound once: these run per element.
        self._get = windows.get
        self._peek = windows.peek
        self._put = windows.put
        self._delete = windows.delete

    def get_window(self, key: str, window: TimeWindow) -> WindowEntry | None:
        window_key = (key, window)
        entry = self._peek(window_key, MISSING)  # most reads end here
        if entry is MISSING or entry is DELETED:
            return self._get(window_key)
        return entry  # type: ignore[no-any-return]

    def put_window(self, key: str, window: TimeWindow, entry: WindowEntry) -> None:
        self._put((key, window), entry)

    def delete_window(self, key: str, window: TimeWindow) -> None:
        self._delete((key, window))

    def get_sessions(self, key: str) -> list[TimeWindow]:
        windows = self._sessions.get(key)
        return [] if windows is None else list(windows)

    def put_sessions(self, key: str, windows: list[TimeWindow]) -> None:
        if windows:
            self._sessions.put(key, list(windows))
        else:
            self._sessions.delete(key)

    def get_key_state(self, key: str) -> dict[str, Any]:
        state = self._txn.get(self._key_state, key)
        return {} if state is None else dict(state)

    def put_key_state(self, key: str, state: dict[str, Any]) -> None:
        self._txn.put(self._key_state, key, dict(state))


class StoredTimers:
    """:class:`eddy.eventtime.TimerStore` on a table whose keys sort as
    :func:`eddy.eventtime.timer_order` does (``encode_timer``). Reads see the
    open transaction: the queue pages in timers registered since the last commit."""

    def __init__(
        self, txn: PartitionTransaction, table: TableSpec[Timer, bool], page_size: int = 4096
    ):
        self._txn = txn
        self._table = table
        self._page_size = page_size

    @property
    def page_size(self) -> int:
        """Timers a page holds (the queue keeps up to two pages, about 250 B each).
        Reading a page sorts the transaction's timer changes, so a page is at least
        as large as they are: a checkpoint that fires a million timers then reads a
        few large pages, not a million changes per 4,096 timers. That costs little
        memory more, since the transaction holds those changes anyway."""
        return max(self._page_size, self._txn.pending(self._table))

    def put_timer(self, timer: Timer) -> None:
        self._txn.put(self._table, timer, True)

    def delete_timer(self, timer: Timer) -> None:
        self._txn.delete(self._table, timer)

    def has_timer(self, timer: Timer) -> bool:
        return self._txn.get(self._table, timer) is not None

    def timers_after(self, after: Timer | None, limit: int | None) -> list[Timer]:
        return self._txn.keys_after(self._table, after, limit, timer_order)
