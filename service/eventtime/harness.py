"""A deterministic harness, like Flink's operator test harness: feed records and
explicit watermarks, move processing time by hand, collect main and side outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eddy.eventtime.joins import tag
from eddy.eventtime.keyed import MAX_WATERMARK, KeyedWindows
from eddy.eventtime.memory import MemoryStateBackend, MemoryTimerStore, MemoryWindowState
from eddy.eventtime.operator import WindowSpec
from eddy.eventtime.process import Emitted, ProcessOperator
from eddy.eventtime.watermarks import WatermarkStrategy
from eddy.eventtime.window_state import WindowResult
from eddy.eventtime.windows import GLOBAL_WINDOW

MAIN = "main"


@dataclass(frozen=True)
class Emission:
    """One thing the harness emitted: a window result (``record`` is None) or a late
    record sent to the side output ``output``."""

    output: str
    key: str | None = None
    window_start_ms: int | None = None
    window_end_ms: int | None = None
    value: Any = None
    kind: str | None = None
    record: Any = None
    timestamp_ms: int | None = None

    def to_json(self, key_field: str = "key") -> dict[str, Any]:
        """The emission as the record a worker sends for it, in the line form both
        replays write (``{"topic", "key", "value"[, "timestamp_ms"]}``): a late record
        as it was read, at its own time; a window result as the worker's window
        record (``{key_field, window_start_ms, window_end_ms, ...value, timing}``),
        at the window's last instant. A replay of a spec and one of an agent equal
        to it then write the same bytes."""
        line: dict[str, Any] = {"topic": self.output, "key": self.key}
        if self.record is not None:
            line["value"] = self.record
        else:
            line["value"] = self._window_record(key_field)
        if self.timestamp_ms is not None:
            line["timestamp_ms"] = self.timestamp_ms
        return line

    def _window_record(self, key_field: str) -> dict[str, Any]:
        # The global window has no bounds to report; the worker writes its ends.
        start = GLOBAL_WINDOW.start_ms if self.window_start_ms is None else self.window_start_ms
        end = GLOBAL_WINDOW.end_ms if self.window_end_ms is None else self.window_end_ms
        fields = self.value if isinstance(self.value, dict) else {"value": self.value}
        return {
            key_field: self.key,
            "window_start_ms": start,
            "window_end_ms": end,
            **fields,
            "timing": self.kind,
        }


class WindowHarness:
    def __init__(
        self,
        spec: WindowSpec,
        *,
        key: Callable[[Any], str],
        timestamp_ms: Callable[[Any], int],
        watermark: WatermarkStrategy | None = None,
        late_output: str | None = None,
        processing_time_ms: int = 0,
        inputs: Sequence[str] = ("input",),
    ) -> None:
        self.inputs = tuple(inputs)
        self.state = MemoryWindowState()
        self.event_timers = MemoryTimerStore()
        self.processing_timers = MemoryTimerStore()
        self.key = key
        self.timestamp_ms = timestamp_ms
        self.windows = KeyedWindows(
            spec,
            watermark=watermark,
            state=self.state,
            event_timers=self.event_timers,
            processing_timers=self.processing_timers,
            inputs=self.inputs,
        )
        self.late_output = late_output
        self.outputs: list[Emission] = []
        self.dropped_late = 0
        self.processing_time_ms = processing_time_ms
        self._collect(self.windows.on_tick(processing_time_ms))

    @property
    def watermark_ms(self) -> int:
        return self.windows.watermark_ms

    def record(self, value: Any, input: str | None = None) -> None:
        """Feed one record; with two inputs (a window join), say which one. Joined
        records enter the window tagged with their side (``joins.tag``)."""
        name = self.inputs[0] if input is None else input
        key = self.key(value)
        timestamp_ms = self.timestamp_ms(value)
        element = value if len(self.inputs) == 1 else tag(self.inputs.index(name), value)
        results, late = self.windows.on_record(
            key, timestamp_ms, element, self.processing_time_ms, name
        )
        if late:
            if self.late_output is None:
                self.dropped_late += 1
            else:
                late_record = Emission(
                    self.late_output, key, record=value, timestamp_ms=timestamp_ms
                )
                self.outputs.append(late_record)
        self._collect(results)

    def watermark(self, watermark_ms: int) -> None:
        self._collect(self.windows.on_watermark(watermark_ms))

    def processing_time(self, now_ms: int) -> None:
        self.processing_time_ms = max(self.processing_time_ms, now_ms)
        self._collect(self.windows.on_tick(self.processing_time_ms))

    def end_of_input(self) -> None:
        self._collect(self.windows.end_of_input())

    def fire_due(self) -> None:
        """The next part of what a watermark closed, when the operator fires a
        bounded number of timers per call (``windows.operator.firing_limit``)."""
        self._collect(self.windows.fire_due())

    def main(self) -> list[Emission]:
        return [e for e in self.outputs if e.output == MAIN]

    def drain(self) -> list[Emission]:
        """The emissions since the last drain, forgotten here: a replay of a long
        input writes them out and holds only one line's worth."""
        emitted, self.outputs = self.outputs, []
        return emitted

    def _collect(self, results: list[WindowResult]) -> None:
        for r in results:
            # A result carries its window's last instant as its time, as the worker
            # sends it; the global window has none (nor bounds: None, not +-2**62).
            if r.window == GLOBAL_WINDOW:
                start, end, at = None, None, None
            else:
                start, end, at = r.window.start_ms, r.window.end_ms, r.window.max_timestamp_ms
            self.outputs.append(Emission(MAIN, r.key, start, end, r.value, r.timing, None, at))


class ProcessHarness:
    """The harness for (co-)process functions and joins: named inputs, explicit
    watermarks and processing time, broadcast records, collected outputs."""

    def __init__(
        self,
        function: Any,
        *,
        key: Callable[[Any], str] | Sequence[Callable[[Any], str]],
        timestamp_ms: Callable[[Any], int | None]
        | Sequence[Callable[[Any], int | None]]
        | None = None,
        watermark: WatermarkStrategy | None = None,
        inputs: Sequence[str] = ("input",),
        processing_time_ms: int = 0,
    ) -> None:
        self.inputs = tuple(inputs)
        self._keys = _per_input(key, len(self.inputs))
        self._timestamps = (
            None if timestamp_ms is None else _per_input(timestamp_ms, len(self.inputs))
        )
        self.backend = MemoryStateBackend()
        self.event_timers = MemoryTimerStore()
        self.processing_timers = MemoryTimerStore()
        self.operator = ProcessOperator(
            function,
            backend=self.backend,
            event_timers=self.event_timers,
            processing_timers=self.processing_timers,
            watermark=watermark,
            inputs=self.inputs,
        )
        self.outputs: list[Emitted] = []
        self.processing_time_ms = processing_time_ms
        self.outputs += self.operator.on_tick(processing_time_ms)

    def record(self, value: Any, input: str | None = None) -> None:
        index = 0 if input is None else self.inputs.index(input)
        timestamp = None if self._timestamps is None else self._timestamps[index](value)
        self.outputs += self.operator.process(self._keys[index](value), timestamp, value, index)

    def broadcast(self, value: Any) -> None:
        self.outputs += self.operator.process_broadcast(value)

    def watermark(self, watermark_ms: int) -> None:
        self.outputs += self.operator.advance_watermark(watermark_ms)

    def processing_time(self, now_ms: int) -> None:
        self.processing_time_ms = max(self.processing_time_ms, now_ms)
        self.outputs += self.operator.on_tick(self.processing_time_ms)

    def end_of_input(self) -> None:
        self.outputs += self.operator.advance_watermark(MAX_WATERMARK)

    def output(self, name: str = MAIN) -> list[Any]:
        return [e.value for e in self.outputs if e.output == name]

    def drain(self) -> list[Emitted]:
        """The emissions since the last drain, forgotten here (as
        :meth:`WindowHarness.drain`)."""
        emitted, self.outputs = self.outputs, []
        return emitted


def _per_input(fn: Any, count: int) -> list[Callable[[Any], Any]]:
    if callable(fn):
        return [fn] * count
    fns = list(fn)
    if len(fns) != count:
        raise ValueError(f"expected {count} functions, one per input, got {len(fns)}")
    return fns
