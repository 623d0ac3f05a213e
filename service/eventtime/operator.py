"""The keyed window operator: assign, merge, accumulate, trigger, evict, clean up.

It follows Flink's ``WindowOperator`` (docs/semantics.md: "Windows", "When a
window fires", "Allowed lateness and late data", "Triggers"):

* an element joins each window it is assigned to unless that window is late,
  i.e. ``watermark >= end - 1 + allowed_lateness``; merging (session) windows
  are merged first and their state combined;
* if it joined none and its timestamp is late too (``ts + lateness <= wm``) it
  is a late element, returned for a side output; an element in a gap between
  sliding windows that is not late is simply dropped;
* the trigger answers each element and timer with CONTINUE / FIRE / PURGE /
  FIRE_AND_PURGE; every emission says ``first`` or ``update``; a purge empties
  the window's contents only: the trigger keeps its state and timers (a purging
  continuous trigger keeps its schedule) until the window is cleaned up;
* a window's state, trigger state and timers go at its cleanup time,
  ``end - 1 + allowed_lateness`` (event time) or ``end - 1`` (processing time).
  As in Flink, where timers are keyed by (time, key, window), the cleanup timer
  first runs the trigger like any other timer of the window, and a trigger timer
  at the cleanup time *is* the cleanup timer (one call, not two).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eddy.eventtime.contexts import ProcessCtx, TriggerCtx
from eddy.eventtime.definition import WindowSpec
from eddy.eventtime.timers import Timer, TimerQueue
from eddy.eventtime.triggers import EventTimeTrigger, TriggerResult
from eddy.eventtime.watermarks import MIN_WATERMARK
from eddy.eventtime.window_state import Timing, WindowEntry, WindowResult, WindowState
from eddy.eventtime.windows import MAX_TIME_MS, TimeWindow, Tumbling

__all__ = ["Timing", "WindowEntry", "WindowOperator", "WindowResult", "WindowSpec", "WindowState"]

# Timers at the same instant fire in namespace order: a window's trigger timer must
# fire before its cleanup timer (Flink fires, then clears), hence the digits.
TRIGGER = "window.0.trigger"
CLEANUP = "window.1.cleanup"
# Shared "no results" list: most elements fire nothing, so nothing is allocated.
# Never appended to: the operator swaps in a fresh list before the first result.
_NONE: list[WindowResult] = []
_ACCEPTED: tuple[bool, list[WindowResult]] = (True, _NONE)
_LATE: tuple[bool, list[WindowResult]] = (False, _NONE)
_MISSING: Any = object()


def _no_aggregate(value: Any, accumulator: Any) -> Any:
    raise TypeError("this window has no aggregate function")


class WindowOperator:
    """Runs one :class:`WindowSpec` for the keys of one partition."""

    def __init__(
        self,
        spec: WindowSpec,
        state: WindowState,
        event_timers: TimerQueue,
        processing_timers: TimerQueue,
    ) -> None:
        self.spec = spec
        self.trigger = spec.effective_trigger
        self._state = state
        self._event_timers = event_timers
        self._processing_timers = processing_timers
        self.watermark_ms = MIN_WATERMARK
        self.processing_time_ms = MIN_WATERMARK
        assigner = spec.assigner
        self._event_time = assigner.is_event_time
        self._merging = assigner.is_merging
        self._cleanup_queue = event_timers if self._event_time else processing_timers
        # The default case (event-time trigger, no merging) needs the trigger only
        # when a window is first seen or already due: skip the call otherwise.
        self._plain = type(self.trigger) is EventTimeTrigger and not self._merging
        self._incremental = spec.incremental
        self._lateness = spec.allowed_lateness_ms
        self._out: list[WindowResult] = _NONE
        #: The most event-time timers one call fires (None: every due one). With a
        #: bound, a watermark that closes a million aligned windows fires them over
        #: several calls, and the caller checkpoints in between, so no checkpoint
        #: holds a million results at once; :attr:`firing_due` says more are due.
        self.firing_limit: int | None = None
        #: Event-time timers the watermark passed are still to fire (:meth:`fire_due`).
        self.firing_due = False
        # Per-element work is most of the cost: bound methods and constants are
        # looked up once here rather than on every element.
        self._get_window = state.get_window
        self._put_window = state.put_window
        self._add_value: Callable[[Any, Any], Any] = (
            spec.aggregate.add if spec.aggregate is not None else _no_aggregate
        )
        # Event-time trigger, incremental aggregate, no merging: the fast path.
        self._hot = self._plain and self._incremental
        self._last_window: TimeWindow | None = None
        self._size_ms = self._offset_ms = self._late_after_ms = 0
        #: :meth:`process`, or its arithmetic shortcut for event-time tumbling windows.
        self.process_element: Callable[[str, int, Any], tuple[bool, list[WindowResult]]]
        self.process_element = self._process_general
        if isinstance(assigner, Tumbling) and assigner.is_event_time:
            self._size_ms, self._offset_ms = assigner.size_ms, assigner.offset_ms
            self._late_after_ms = assigner.size_ms - 1 + self._lateness
            self.process_element = self._process_tumbling

    # -- input -------------------------------------------------------------------

    def process(self, key: str, timestamp_ms: int, value: Any) -> tuple[bool, list[WindowResult]]:
        """Add one element under the current clocks.

        Returns:
            ``(accepted, results)``: ``accepted`` is False for a late element (to be
            side-output or dropped by the caller); ``results`` are firings the
            element caused (count triggers, updates within allowed lateness).
        """
        return self.process_element(key, timestamp_ms, value)

    def _process_general(
        self, key: str, timestamp_ms: int, value: Any
    ) -> tuple[bool, list[WindowResult]]:
        self._out = _NONE
        assigner = self.spec.assigner
        element_ts = timestamp_ms if self._event_time else self.processing_time_ms
        skipped = True
        for window in assigner.assign(element_ts):
            if self._merging:
                window = self._merge(key, window)
                if self._is_late(window):
                    self._retire(key, window)
                    continue
            elif self._is_late(window):
                continue
            skipped = False
            self._add(key, window, element_ts, value)
        if skipped and self._event_time:
            late = timestamp_ms + self._lateness <= self.watermark_ms
            return not late, self._out
        return True, self._out

    def _process_tumbling(
        self, key: str, timestamp_ms: int, value: Any
    ) -> tuple[bool, list[WindowResult]]:
        """:meth:`process` for the most common window, without the general machinery:
        one event-time window per element, found arithmetically and cached."""
        size = self._size_ms
        start = timestamp_ms - (timestamp_ms - self._offset_ms) % size
        window = self._last_window
        if window is None or window[0] != start:
            window = self._last_window = TimeWindow(start, start + size)
        watermark_ms = self.watermark_ms
        if start + self._late_after_ms <= watermark_ms:  # the window is gone
            if timestamp_ms + self._lateness <= watermark_ms:
                return _LATE
            return _ACCEPTED
        entry = self._get_window(key, window)
        if entry is not None and self._hot and start + size - 1 > watermark_ms:
            # An open window that already exists: the trigger has its timer and
            # would answer CONTINUE, so only the accumulator changes.
            entry.contents = self._add_value(value, entry.contents)
            self._put_window(key, window, entry)
            return _ACCEPTED
        self._out = _NONE
        self._add(key, window, timestamp_ms, value, entry)
        return True, self._out

    def advance_watermark(self, watermark_ms: int) -> list[WindowResult]:
        """Move event time forward; fire due timers in timestamp order (at most
        :attr:`firing_limit` of them: :meth:`fire_due` fires the rest)."""
        self._out = _NONE
        if watermark_ms > self.watermark_ms:
            self.watermark_ms = watermark_ms
            # The watermark moves on most records; a timer is due on few of them.
            if self._event_timers.due(watermark_ms):
                self._fire_event_timers()
        return self._out

    def fire_due(self) -> list[WindowResult]:
        """Fire the next timers the watermark already passed, in the order one
        unbounded call would have fired them, at most :attr:`firing_limit`."""
        self._out = _NONE
        self._fire_event_timers()
        return self._out

    def restored(self) -> None:
        """The clock and the timers were just reloaded: a checkpoint taken between
        two bounded calls leaves timers at or before the watermark to fire."""
        due_ms = self._event_timers.next_time_ms()
        self.firing_due = due_ms is not None and due_ms <= self.watermark_ms

    def _fire_event_timers(self) -> None:
        limit = self.firing_limit
        self.firing_due = False
        for fired, timer in enumerate(self._event_timers.pop_due(self.watermark_ms), 1):
            self._on_timer(timer, event_time=True)
            if fired == limit:
                # Stopped early; one more call finds nothing if that was the last.
                self.firing_due = self._event_timers.due(self.watermark_ms)
                return

    def advance_processing_time(self, now_ms: int) -> list[WindowResult]:
        self._out = _NONE
        if now_ms > self.processing_time_ms:
            self.processing_time_ms = now_ms
            if self._processing_timers.due(now_ms):
                for timer in self._processing_timers.pop_due(now_ms):
                    self._on_timer(timer, event_time=False)
        return self._out

    # -- what contexts call --------------------------------------------------------

    def trigger_timer(
        self, key: str, window: TimeWindow, time_ms: int, *, event_time: bool, register: bool
    ) -> None:
        """Register or delete a trigger's timer for ``window``.

        A timer at the window's cleanup time, in the cleanup's time domain, is the
        cleanup timer itself (Flink keys timers by time, key and window): it runs
        the trigger anyway, so registering it is a no-op, and deleting it must not
        cancel the cleanup.
        """
        if (
            event_time is self._event_time
            and window.end_ms < MAX_TIME_MS
            and time_ms == self._cleanup_time(window)
        ):
            return
        queue = self._event_timers if event_time else self._processing_timers
        timer = Timer(time_ms, TRIGGER, key, window.start_ms, window.end_ms)
        if register:
            queue.register(timer)
        else:
            queue.delete(timer)

    def key_state(self, key: str) -> dict[str, Any]:
        return self._state.get_key_state(key)

    def event_timers(self) -> TimerQueue:
        return self._event_timers

    def processing_timers(self) -> TimerQueue:
        return self._processing_timers

    # -- internals ---------------------------------------------------------------

    def _add(
        self,
        key: str,
        window: TimeWindow,
        element_ts: int,
        value: Any,
        entry: WindowEntry | None = _MISSING,
    ) -> None:
        if entry is _MISSING:
            entry = self._state.get_window(key, window)
        new = entry is None
        if entry is None:
            entry = WindowEntry(None)
            self._register_cleanup(key, window, fresh=True)
        if self._incremental:
            aggregate = self.spec.aggregate
            assert aggregate is not None
            contents = aggregate.create() if entry.contents is None else entry.contents
            entry.contents = aggregate.add(value, contents)
        elif entry.contents is None:
            entry.contents = [[element_ts, value]]
        else:
            entry.contents.append([element_ts, value])
        if self._plain and not new and window.max_timestamp_ms > self.watermark_ms:
            self._state.put_window(key, window, entry)
            return
        result = self.trigger.on_element(element_ts, window, TriggerCtx(self, key, window, entry))
        self._apply(key, window, entry, result)

    def _on_timer(self, timer: Timer, *, event_time: bool) -> None:
        key = timer.key
        window = TimeWindow(timer.window_start_ms, timer.window_end_ms)
        cleanup = timer.namespace == CLEANUP
        entry = self._state.get_window(key, window)
        if entry is not None:  # else cleaned up or merged away, with its timers
            ctx = TriggerCtx(self, key, window, entry)
            if event_time:
                result = self.trigger.on_event_time(timer.time_ms, window, ctx)
            else:
                result = self.trigger.on_processing_time(timer.time_ms, window, ctx)
            self._apply(key, window, entry, result, keep=not cleanup)
        if cleanup:
            self._clear(key, window, entry)

    def _apply(
        self,
        key: str,
        window: TimeWindow,
        entry: WindowEntry,
        result: TriggerResult,
        *,
        keep: bool = True,
    ) -> None:
        has_contents = entry.contents is not None and (self._incremental or entry.contents)
        if result.fire and has_contents:
            timing: Timing = "update" if entry.fired else "first"
            outputs = self._emit(key, window, entry)
            if outputs:
                if self._out is _NONE:
                    self._out = []
                watermark_ms = self.watermark_ms
                for value in outputs:
                    self._out.append(WindowResult(key, window, value, timing, watermark_ms))
            entry.fired = True
        if result.purge:
            # Only the contents go. The entry stays, and with it the trigger's state
            # and timers: a purging trigger carries on as it would without the purge
            # (a continuous one fires at its next interval, not one counted from the
            # next element), and they go at the window's cleanup time, when the
            # trigger's ``clear`` runs. A trigger that wants a fresh start after
            # firing resets its own state (the count trigger does). The next firing
            # is ``first`` again: it reports on contents added since.
            entry.contents = None
            entry.fired = False
        if keep:
            self._state.put_window(key, window, entry)

    def _emit(self, key: str, window: TimeWindow, entry: WindowEntry) -> list[Any]:
        spec = self.spec
        ctx = ProcessCtx(self, key, window, entry)
        if self._incremental:
            assert spec.aggregate is not None
            result = spec.aggregate.result(entry.contents)
            outputs = [result] if spec.process is None else spec.process.process([result], ctx)
        else:
            outputs = self._emit_elements(window, entry, ctx)
        if ctx.global_dirty:
            self._state.put_key_state(key, ctx.global_state)
        return outputs

    def _emit_elements(self, window: TimeWindow, entry: WindowEntry, ctx: ProcessCtx) -> list[Any]:
        """Stored elements: evict before, aggregate and/or process, evict after."""
        spec = self.spec
        elements = entry.contents
        if spec.evictor is not None:
            elements = spec.evictor.evict_before(elements, window, ctx)
        values = [value for _, value in elements]
        if spec.aggregate is not None and values:
            accumulator = spec.aggregate.create()
            for value in values:
                accumulator = spec.aggregate.add(value, accumulator)
            values = [spec.aggregate.result(accumulator)]
        # An evictor may leave nothing: there is then nothing to compute (an empty
        # window never fires), but the evictor's choice is still applied below.
        outputs: list[Any] = []
        if values:
            outputs = values if spec.process is None else spec.process.process(values, ctx)
        if spec.evictor is not None:
            elements = spec.evictor.evict_after(elements, window, ctx)
        entry.contents = elements
        return outputs

    def _merge(self, key: str, window: TimeWindow) -> TimeWindow:
        """Merge ``window`` with the key's sessions it touches; return the result."""
        sessions = self._state.get_sessions(key)
        touching = [s for s in sessions if s.intersects(window)]
        if not touching:
            self._state.put_sessions(key, [*sessions, window])
            return window
        merged = window
        for session in touching:
            merged = merged.cover(session)
        if touching == [merged]:
            return merged  # already inside an existing session
        found = [(s, e) for s in touching if (e := self._state.get_window(key, s)) is not None]
        # Combine first: clearing a trigger wipes its state, which the merge needs.
        combined = self._combine([entry for _, entry in found])
        for session, entry in found:
            self.trigger.clear(session, TriggerCtx(self, key, session, entry))
        for session in touching:
            self._delete_cleanup(key, session)
            self._state.delete_window(key, session)
        self._state.put_sessions(key, [s for s in sessions if s not in touching] + [merged])
        self._register_cleanup(key, merged)
        self.trigger.on_merge(merged, TriggerCtx(self, key, merged, combined))
        self._state.put_window(key, merged, combined)
        return merged

    def _combine(self, entries: list[WindowEntry]) -> WindowEntry:
        if not entries:
            return WindowEntry(None)
        contents = None
        for entry in entries:
            if entry.contents is None:
                continue
            if contents is None:
                contents = entry.contents
            elif self._incremental:
                assert self.spec.aggregate is not None
                contents = self.spec.aggregate.merge(contents, entry.contents)
            else:
                contents = sorted(contents + entry.contents, key=lambda e: e[0])
        state: dict[str, Any] = {}
        for entry in entries:
            state.update(entry.state)
        return WindowEntry(
            contents,
            fired=any(e.fired for e in entries),
            trigger=self.trigger.merge_state([dict(e.trigger) for e in entries]),
            state=state,
        )

    def _retire(self, key: str, window: TimeWindow) -> None:
        """A new session that is late on arrival: forget it again."""
        sessions = self._state.get_sessions(key)
        if window in sessions:
            self._state.put_sessions(key, [s for s in sessions if s != window])
        if self._state.get_window(key, window) is None:
            self._delete_cleanup(key, window)

    def _clear(self, key: str, window: TimeWindow, entry: WindowEntry | None) -> None:
        if entry is not None:
            self.trigger.clear(window, TriggerCtx(self, key, window, entry))
            self._state.delete_window(key, window)
        if self._merging:
            sessions = self._state.get_sessions(key)
            if window in sessions:
                self._state.put_sessions(key, [s for s in sessions if s != window])

    def _is_late(self, window: TimeWindow) -> bool:
        return self._event_time and self._cleanup_time(window) <= self.watermark_ms

    def _cleanup_time(self, window: TimeWindow) -> int:
        if window.end_ms >= MAX_TIME_MS:
            return MAX_TIME_MS
        if not self._event_time:
            return window.max_timestamp_ms
        return window.max_timestamp_ms + self._lateness

    def _cleanup_timer(self, key: str, window: TimeWindow) -> Timer:
        return Timer(self._cleanup_time(window), CLEANUP, key, window.start_ms, window.end_ms)

    def _register_cleanup(self, key: str, window: TimeWindow, *, fresh: bool = False) -> None:
        if window.end_ms < MAX_TIME_MS:
            self._cleanup_queue.register(self._cleanup_timer(key, window), fresh=fresh)

    def _delete_cleanup(self, key: str, window: TimeWindow) -> None:
        self._cleanup_queue.delete(self._cleanup_timer(key, window))
