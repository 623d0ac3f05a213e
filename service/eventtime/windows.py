"""Window assigners: which half-open ``[start, end)`` windows hold a timestamp."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol


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


class WindowAssigner(Protocol):
    """Maps an element's timestamp to the windows it belongs to (possibly none)."""

    def assign(self, timestamp_ms: int) -> Sequence[TimeWindow]: ...


@dataclass(frozen=True, slots=True)
class Tumbling:
    """Fixed-size, non-overlapping windows: ``start = ts - (ts - offset) % size``.

    The offset shifts the grid, e.g. ``offset_ms=-8h`` for days in UTC+8.
    """

    size_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        if self.size_ms <= 0:
            raise ValueError(f"size_ms must be positive, got {self.size_ms}")
        if abs(self.offset_ms) >= self.size_ms:
            raise ValueError("abs(offset_ms) must be smaller than size_ms")

    def window_for(self, timestamp_ms: int) -> TimeWindow:
        # Python's % is a floor modulo, so negative timestamps land in the right window.
        start = timestamp_ms - (timestamp_ms - self.offset_ms) % self.size_ms
        return TimeWindow(start, start + self.size_ms)

    def assign(self, timestamp_ms: int) -> Sequence[TimeWindow]:
        return (self.window_for(timestamp_ms),)
