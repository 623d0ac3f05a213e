"""In-memory state for the core: unit tests and offline replays use it."""

from __future__ import annotations

from collections.abc import Iterable

from service.eventtime.operator import WindowEntry
from service.eventtime.timers import Timer
from service.eventtime.windows import TimeWindow


class MemoryWindowState:
    def __init__(self) -> None:
        self.windows: dict[tuple[str, TimeWindow], WindowEntry] = {}

    def get_window(self, key: str, window: TimeWindow) -> WindowEntry | None:
        entry = self.windows.get((key, window))
        # A copy, as a store that serialises would return: callers must put to change.
        return None if entry is None else WindowEntry(entry.accumulator, entry.fired)

    def put_window(self, key: str, window: TimeWindow, entry: WindowEntry) -> None:
        self.windows[(key, window)] = WindowEntry(entry.accumulator, entry.fired)

    def delete_window(self, key: str, window: TimeWindow) -> None:
        self.windows.pop((key, window), None)


class MemoryTimerStore:
    def __init__(self) -> None:
        self.timers: set[Timer] = set()

    def put_timer(self, timer: Timer) -> None:
        self.timers.add(timer)

    def delete_timer(self, timer: Timer) -> None:
        self.timers.discard(timer)

    def load_timers(self) -> Iterable[Timer]:
        return set(self.timers)
