"""In-memory state for the core: unit tests, the replay harness and the CLI use it."""

from __future__ import annotations

import bisect
import copy
from typing import Any

from eddy.eventtime.timers import Timer, timer_order
from eddy.eventtime.window_state import WindowEntry
from eddy.eventtime.windows import TimeWindow


class MemoryWindowState:
    """Keeps deep copies, as a store that serialises would: a caller must ``put``
    to change anything, so tests catch an operator that forgets to."""

    def __init__(self) -> None:
        self.windows: dict[tuple[str, TimeWindow], WindowEntry] = {}
        self.sessions: dict[str, list[TimeWindow]] = {}
        self.key_states: dict[str, dict[str, Any]] = {}

    def get_window(self, key: str, window: TimeWindow) -> WindowEntry | None:
        entry = self.windows.get((key, window))
        return None if entry is None else copy.deepcopy(entry)

    def put_window(self, key: str, window: TimeWindow, entry: WindowEntry) -> None:
        self.windows[(key, window)] = copy.deepcopy(entry)

    def delete_window(self, key: str, window: TimeWindow) -> None:
        self.windows.pop((key, window), None)

    def get_sessions(self, key: str) -> list[TimeWindow]:
        return list(self.sessions.get(key, []))

    def put_sessions(self, key: str, windows: list[TimeWindow]) -> None:
        if windows:
            self.sessions[key] = list(windows)
        else:
            self.sessions.pop(key, None)

    def get_key_state(self, key: str) -> dict[str, Any]:
        return copy.deepcopy(self.key_states.get(key, {}))

    def put_key_state(self, key: str, state: dict[str, Any]) -> None:
        self.key_states[key] = copy.deepcopy(state)


class MemoryTimerStore:
    """:class:`eddy.eventtime.TimerStore` in a set. All timers stay in the queue's
    memory unless ``page_size`` asks it to page them as it would from RocksDB."""

    def __init__(self, page_size: int | None = None) -> None:
        self.timers: set[Timer] = set()
        self.page_size = page_size

    def put_timer(self, timer: Timer) -> None:
        self.timers.add(timer)

    def delete_timer(self, timer: Timer) -> None:
        self.timers.discard(timer)

    def has_timer(self, timer: Timer) -> bool:
        return timer in self.timers

    def timers_after(self, after: Timer | None, limit: int | None) -> list[Timer]:
        ordered = sorted(self.timers, key=timer_order)
        if after is not None:
            ordered = ordered[bisect.bisect_right(ordered, timer_order(after), key=timer_order) :]
        return ordered if limit is None else ordered[:limit]


class MemoryStateBackend:
    """:class:`eddy.eventtime.state.StateBackend` in a dict (deep copies, as a
    serialising store would hand out)."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], Any] = {}

    def get_state(self, name: str, key: str) -> Any | None:
        return copy.deepcopy(self.values.get((name, key)))

    def put_state(self, name: str, key: str, value: Any) -> None:
        self.values[(name, key)] = copy.deepcopy(value)

    def delete_state(self, name: str, key: str) -> None:
        self.values.pop((name, key), None)
