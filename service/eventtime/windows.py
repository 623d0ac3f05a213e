"""Windows and window assigners: which windows hold an element.

Time windows are half-open ``[start_ms, end_ms)``; a window's last instant,
``end_ms - 1``, is when the default trigger fires it. The global window holds
everything and never ends; count windows are the global window with a count
trigger (see :mod:`eddy.eventtime.spec`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

MAX_TIME_MS = 2**62
MIN_TIME_MS = -(2**62)


class TimeWindow(NamedTuple):
    """A half-open event-time interval ``[start_ms, end_ms)``."""

    start_ms: int
    end_ms: int

    @property
    def max_timestamp_ms(self) -> int:
        """The last instant inside the window; the default trigger fires here."""
        return self.end_ms - 1

    def contains(self, timestamp_ms: int) -> bool:
        return self.start_ms <= timestamp_ms < self.end_ms

    def intersects(self, other: TimeWindow) -> bool:
        return self.start_ms <= other.end_ms and other.start_ms <= self.end_ms

    def cover(self, other: TimeWindow) -> TimeWindow:
        return TimeWindow(min(self.start_ms, other.start_ms), max(self.end_ms, other.end_ms))


GLOBAL_WINDOW = TimeWindow(MIN_TIME_MS, MAX_TIME_MS)


class WindowAssigner(Protocol):
    """Maps an element's timestamp to the windows it belongs to (possibly none).

    ``timestamp_ms`` is the element's event time for event-time assigners and the
    current processing time for processing-time ones.
    """

    @property
    def is_event_time(self) -> bool: ...

    @property
    def is_merging(self) -> bool: ...

    def assign(self, timestamp_ms: int) -> Sequence[TimeWindow]: ...


@dataclass(frozen=True, slots=True)
class Tumbling:
    """Fixed-size, non-overlapping windows: ``start = ts - (ts - offset) % size``.

    The offset shifts the grid, e.g. ``offset_ms=-8h`` for days in UTC+8.
    """

    size_ms: int
    offset_ms: int = 0
    processing_time: bool = False

    def __post_init__(self) -> None:
        if self.size_ms <= 0:
            raise ValueError(f"size_ms must be positive, got {self.size_ms}")
        if abs(self.offset_ms) >= self.size_ms:
            raise ValueError("abs(offset_ms) must be smaller than size_ms")

    @property
    def is_event_time(self) -> bool:
        return not self.processing_time

    @property
    def is_merging(self) -> bool:
        return False

    def window_for(self, timestamp_ms: int) -> TimeWindow:
        # Python's % is a floor modulo, so negative timestamps land in the right window.
        start = timestamp_ms - (timestamp_ms - self.offset_ms) % self.size_ms
        return TimeWindow(start, start + self.size_ms)

    def assign(self, timestamp_ms: int) -> Sequence[TimeWindow]:
        return (self.window_for(timestamp_ms),)


@dataclass(frozen=True, slots=True)
class Sliding:
    """Windows of ``size_ms`` starting every ``slide_ms``.

    An element belongs to ``size/slide`` windows; when ``slide > size`` the windows
    leave gaps and an element in a gap belongs to none (it is dropped, not late).
    """

    size_ms: int
    slide_ms: int
    offset_ms: int = 0
    processing_time: bool = False

    def __post_init__(self) -> None:
        if self.size_ms <= 0 or self.slide_ms <= 0:
            raise ValueError("size_ms and slide_ms must be positive")
        if abs(self.offset_ms) >= self.slide_ms:
            raise ValueError("abs(offset_ms) must be smaller than slide_ms")

    @property
    def is_event_time(self) -> bool:
        return not self.processing_time

    @property
    def is_merging(self) -> bool:
        return False

    @property
    def windows_per_element(self) -> int:
        """The most windows one element belongs to, ``ceil(size / slide)``: what
        each record costs in state updates and timers."""
        return -(-self.size_ms // self.slide_ms)

    def assign(self, timestamp_ms: int) -> Sequence[TimeWindow]:
        last_start = timestamp_ms - (timestamp_ms - self.offset_ms) % self.slide_ms
        windows = []
        start = last_start
        while start > timestamp_ms - self.size_ms:
            windows.append(TimeWindow(start, start + self.size_ms))
            start -= self.slide_ms
        return windows


@dataclass(frozen=True, slots=True)
class Session:
    """Each element opens ``[ts, ts + gap)``; windows that overlap or touch merge.

    Touching counts as merging, as in Flink: ``[0, 10)`` and ``[10, 20)`` become
    ``[0, 20)`` because less than ``gap`` separates their elements.
    """

    gap_ms: int
    processing_time: bool = False

    def __post_init__(self) -> None:
        if self.gap_ms <= 0:
            raise ValueError(f"gap_ms must be positive, got {self.gap_ms}")

    @property
    def is_event_time(self) -> bool:
        return not self.processing_time

    @property
    def is_merging(self) -> bool:
        return True

    def assign(self, timestamp_ms: int) -> Sequence[TimeWindow]:
        return (TimeWindow(timestamp_ms, timestamp_ms + self.gap_ms),)


@dataclass(frozen=True, slots=True)
class Global:
    """One window per key holding every element; only a trigger ever fires it."""

    @property
    def is_event_time(self) -> bool:
        return True

    @property
    def is_merging(self) -> bool:
        return False

    def assign(self, timestamp_ms: int) -> Sequence[TimeWindow]:
        return (GLOBAL_WINDOW,)
