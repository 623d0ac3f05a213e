"""The keyed event-time window operator: assign, accumulate, fire on watermark.

Semantics (docs/semantics.md sections D and G, as Flink does it):

* an element joins every window its timestamp falls in whose lateness has not
  expired: a window is late once ``watermark >= end - 1 + allowed_lateness``;
* an element is late (returned as such, for a side output) when every window it
  belongs to is late; an element that belongs to no window (a gap between
  sliding windows) is dropped by the assigner and is not late;
* a window fires once when the watermark reaches ``end - 1`` ("first"), and again
  for each element that arrives within the allowed lateness ("update");
* its state is removed when the watermark reaches ``end - 1 + allowed_lateness``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

from service.eventtime.aggregates import AggregateFunction
from service.eventtime.timers import Timer, TimerQueue
from service.eventtime.watermarks import MIN_WATERMARK
from service.eventtime.windows import TimeWindow, WindowAssigner

FIRE = "window.fire"
CLEANUP = "window.cleanup"


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """What to compute: a frozen definition, separate from running it."""

    assigner: WindowAssigner
    aggregate: AggregateFunction[Any, Any, Any]
    allowed_lateness_ms: int = 0

    def __post_init__(self) -> None:
        if self.allowed_lateness_ms < 0:
            raise ValueError("allowed_lateness_ms must be >= 0")


@dataclass(slots=True)
class WindowEntry:
    """A window's state for one key: its accumulator and whether it fired yet."""

    accumulator: Any
    fired: bool = False


class WindowResult(NamedTuple):
    key: str
    window: TimeWindow
    value: Any
    timing: Literal["first", "update"]
    watermark_ms: int


class WindowState(Protocol):
    """Where the operator keeps one ``WindowEntry`` per (key, window)."""

    def get_window(self, key: str, window: TimeWindow) -> WindowEntry | None: ...

    def put_window(self, key: str, window: TimeWindow, entry: WindowEntry) -> None: ...

    def delete_window(self, key: str, window: TimeWindow) -> None: ...


class WindowOperator:
    """Runs one :class:`WindowSpec` for the keys of one partition."""

    def __init__(self, spec: WindowSpec, state: WindowState, timers: TimerQueue) -> None:
        self.spec = spec
        self._state = state
        self._timers = timers
        self.watermark_ms = MIN_WATERMARK

    def is_late(self, window: TimeWindow) -> bool:
        return window.max_timestamp_ms + self.spec.allowed_lateness_ms <= self.watermark_ms

    def process(self, key: str, timestamp_ms: int, value: Any) -> tuple[bool, list[WindowResult]]:
        """Add one element under the current watermark.

        Returns:
            ``(accepted, results)``: ``accepted`` is False when the element is late
            for every window it belongs to; ``results`` are immediate re-firings of
            windows updated within their allowed lateness.
        """
        windows = self.spec.assigner.assign(timestamp_ms)
        if not windows:
            return True, []
        aggregate = self.spec.aggregate
        accepted = False
        results: list[WindowResult] = []
        for window in windows:
            if self.is_late(window):
                continue
            accepted = True
            entry = self._state.get_window(key, window)
            if entry is None:
                entry = WindowEntry(aggregate.create())
                self._register_timers(key, window)
            entry.accumulator = aggregate.add(value, entry.accumulator)
            self._state.put_window(key, window, entry)
            if window.max_timestamp_ms <= self.watermark_ms:
                # Late but within allowed lateness: Flink's event-time trigger fires
                # at once, and the result supersedes the earlier one.
                results.append(self._emit(key, window, entry, "update"))
        return accepted, results

    def advance(self, watermark_ms: int) -> list[WindowResult]:
        """Move the clock forward and fire every due window, in timestamp order."""
        if watermark_ms <= self.watermark_ms:
            return []
        self.watermark_ms = watermark_ms
        results: list[WindowResult] = []
        for timer in self._timers.pop_due(watermark_ms):
            window = TimeWindow(timer.window_start_ms, timer.window_end_ms)
            if timer.namespace == FIRE:
                entry = self._state.get_window(timer.key, window)
                if entry is None:
                    continue
                results.append(self._emit(timer.key, window, entry, "first"))
                if self.spec.allowed_lateness_ms == 0:
                    self._state.delete_window(timer.key, window)
                else:
                    entry.fired = True
                    self._state.put_window(timer.key, window, entry)
            elif timer.namespace == CLEANUP:
                self._state.delete_window(timer.key, window)
        return results

    def _register_timers(self, key: str, window: TimeWindow) -> None:
        start, end = window
        self._timers.register(Timer(window.max_timestamp_ms, FIRE, key, start, end))
        if self.spec.allowed_lateness_ms:
            cleanup_ms = window.max_timestamp_ms + self.spec.allowed_lateness_ms
            self._timers.register(Timer(cleanup_ms, CLEANUP, key, start, end))

    def _emit(
        self, key: str, window: TimeWindow, entry: WindowEntry, timing: Literal["first", "update"]
    ) -> WindowResult:
        value = self.spec.aggregate.result(entry.accumulator)
        return WindowResult(key, window, value, timing, self.watermark_ms)
