"""Watermark strategies (frozen definitions) and their per-input generators."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

# Flink's Long.MIN_VALUE: no event time has been observed yet.
MIN_WATERMARK = -(2**63)


class WatermarkGenerator(Protocol):
    """Tracks one input's event-time progress. Watermarks never go backwards."""

    def on_event(self, timestamp_ms: int) -> None: ...

    @property
    def watermark_ms(self) -> int: ...

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, snapshot: dict[str, Any]) -> None: ...


class WatermarkStrategy(Protocol):
    def create(self) -> WatermarkGenerator: ...


@dataclass(frozen=True, slots=True)
class BoundedOutOfOrderness:
    """Watermark = max timestamp seen - bound - 1, as Flink computes it.

    The ``- 1`` makes an event exactly ``bound_ms`` behind the maximum still on
    time: the watermark promises no more events at or before it.
    """

    bound_ms: int

    def __post_init__(self) -> None:
        if self.bound_ms < 0:
            raise ValueError(f"bound_ms must be >= 0, got {self.bound_ms}")

    def create(self) -> BoundedOutOfOrdernessGenerator:
        return BoundedOutOfOrdernessGenerator(self.bound_ms)


class BoundedOutOfOrdernessGenerator:
    __slots__ = ("_bound_ms", "_max_timestamp_ms", "_watermark_ms")

    def __init__(self, bound_ms: int) -> None:
        self._bound_ms = bound_ms
        self._max_timestamp_ms: int | None = None
        self._watermark_ms = MIN_WATERMARK

    def on_event(self, timestamp_ms: int) -> None:
        if self._max_timestamp_ms is None or timestamp_ms > self._max_timestamp_ms:
            self._max_timestamp_ms = timestamp_ms
            self._watermark_ms = max(self._watermark_ms, timestamp_ms - self._bound_ms - 1)

    @property
    def watermark_ms(self) -> int:
        return self._watermark_ms

    @property
    def max_timestamp_ms(self) -> int | None:
        return self._max_timestamp_ms

    def snapshot(self) -> dict[str, Any]:
        return {"max_timestamp_ms": self._max_timestamp_ms, "watermark_ms": self._watermark_ms}

    def restore(self, snapshot: dict[str, Any]) -> None:
        self._max_timestamp_ms = snapshot.get("max_timestamp_ms")
        self._watermark_ms = max(self._watermark_ms, int(snapshot["watermark_ms"]))
