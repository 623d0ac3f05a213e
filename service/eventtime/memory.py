"""In-memory state for the core: unit tests, the replay harness and the CLI use it."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from service.eventtime.timers import Timer
from service.eventtime.window_state import WindowEntry
from service.eventtime.windows import TimeWindow


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
    def __init__(self) -> None:
        self.timers: set[Timer] = set()

    def put_timer(self, timer: Timer) -> None:
        self.timers.add(timer)

    def delete_timer(self, timer: Timer) -> None:
        self.timers.discard(timer)

    def load_timers(self) -> Iterable[Timer]:
        return set(self.timers)


class MemoryStateBackend:
    """:class:`service.eventtime.state.StateBackend` in a dict (deep copies, as a
    serialising store would hand out)."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], Any] = {}

    def get_state(self, name: str, key: str) -> Any | None:
        return copy.deepcopy(self.values.get((name, key)))

    def put_state(self, name: str, key: str, value: Any) -> None:
        self.values[(name, key)] = copy.deepcopy(value)

    def delete_state(self, name: str, key: str) -> None:
        self.values.pop((name, key), None)
