"""One partition's windowed aggregation, pure: watermarks + the window operator.

Workers run it over RocksDB state and Kafka; the harness and the replay CLI run
the very same object over in-memory state. Only the state and the clock differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eddy.eventtime.operator import WindowOperator, WindowSpec
from eddy.eventtime.timers import TimerQueue, TimerStore
from eddy.eventtime.watermarks import MIN_WATERMARK, WatermarkStrategy, WatermarkTracker
from eddy.eventtime.window_state import WindowResult, WindowState

MAX_WATERMARK = 2**63 - 1  # end of a bounded input: every event-time timer fires


class KeyedWindows:
    def __init__(
        self,
        spec: WindowSpec,
        *,
        watermark: WatermarkStrategy | None,
        state: WindowState,
        event_timers: TimerStore,
        processing_timers: TimerStore,
        inputs: Sequence[str] = ("input",),
    ) -> None:
        self._event_timers = TimerQueue(event_timers)
        self._processing_timers = TimerQueue(processing_timers)
        self.operator = WindowOperator(spec, state, self._event_timers, self._processing_timers)
        self._process = self.operator.process_element
        self._strategy = watermark
        self._inputs = tuple(inputs)
        self.tracker = None if watermark is None else WatermarkTracker(watermark, self._inputs)
        self.reload(None)

    @property
    def watermark_ms(self) -> int:
        return self.operator.watermark_ms

    def reload(self, snapshot: dict[str, Any] | None) -> None:
        """Rebuild timers from their store and the clock from ``snapshot``.

        This sets the clock without firing anything. The restored watermark fired
        its timers before it was saved, all of them unless the operator fires in
        bounded calls (``operator.firing_limit``): then ``operator.firing_due``
        says that some are left, for :meth:`fire_due`.
        """
        self._event_timers.reload()
        self._processing_timers.reload()
        if self._strategy is not None:
            self.tracker = WatermarkTracker(self._strategy, self._inputs)
        self.operator.watermark_ms = MIN_WATERMARK
        if snapshot is not None:
            if self.tracker is not None:
                self.tracker.restore(snapshot)
            self.operator.watermark_ms = int(snapshot.get("emitted_ms", MIN_WATERMARK))
        self.operator.restored()

    def snapshot(self) -> dict[str, Any]:
        """The clock to restore. An explicit watermark (an input line, the end of
        input) moves the operator past its tracker, so the operator's clock is the
        one saved: a restore must never put the clock back."""
        if self.tracker is None:
            return {"emitted_ms": self.operator.watermark_ms}
        snapshot = self.tracker.snapshot()
        snapshot["emitted_ms"] = max(snapshot["emitted_ms"], self.operator.watermark_ms)
        return snapshot

    def on_record(
        self, key: str, timestamp_ms: int, value: Any, now_ms: int, input_name: str = "input"
    ) -> tuple[list[WindowResult], bool]:
        """Process one record; then let it move the watermark (Flink's order).

        Returns:
            The window results it caused, and whether it was late.
        """
        results, late = self.on_element(key, timestamp_ms, value)
        fired = self.observe(input_name, timestamp_ms, value, now_ms)
        return (results + fired if fired else results), late

    def on_element(
        self, key: str, timestamp_ms: int, value: Any
    ) -> tuple[list[WindowResult], bool]:
        """One element, judged against the watermark before its record: the
        results it caused and whether it was late. The clock does not move."""
        accepted, results = self._process(key, timestamp_ms, value)
        return results, not accepted

    def observe(
        self, input_name: str, timestamp_ms: int, value: Any, now_ms: int
    ) -> list[WindowResult]:
        """A source record was handled (whatever elements it gave): let its event
        time move the watermark, and fire what the new watermark closes."""
        tracker = self.tracker
        if tracker is not None and tracker.on_event(input_name, timestamp_ms, value, now_ms):
            return self.operator.advance_watermark(tracker.watermark_ms)
        return []

    def on_marker(
        self, upstream: int, upstreams: int, watermark_ms: int, now_ms: int
    ) -> list[WindowResult]:
        """A watermark record from an upstream task (after a repartition)."""
        tracker = self.tracker
        if tracker is not None and tracker.on_marker(upstream, upstreams, watermark_ms, now_ms):
            return self.operator.advance_watermark(tracker.watermark_ms)
        return []

    def fire_due(self) -> list[WindowResult]:
        """The next bounded call's firings, once a watermark stopped early."""
        return self.operator.fire_due()

    def on_watermark(self, watermark_ms: int) -> list[WindowResult]:
        """An explicit watermark (from the input itself, or the end of input)."""
        return self.operator.advance_watermark(watermark_ms)

    def on_tick(self, now_ms: int) -> list[WindowResult]:
        """Processing time reached ``now_ms``: periodic watermarks, idleness,
        processing-time timers."""
        results: list[WindowResult] = []
        tracker = self.tracker
        if tracker is not None and tracker.on_tick(now_ms):
            results += self.operator.advance_watermark(tracker.watermark_ms)
        results += self.operator.advance_processing_time(now_ms)
        return results

    def end_of_input(self) -> list[WindowResult]:
        return self.operator.advance_watermark(MAX_WATERMARK)
