"""The keyed window operator: assign, merge, accumulate, trigger, evict, clean up.

It follows Flink's ``WindowOperator`` (docs/semantics.md D, G):

* an element joins each window it is assigned to unless that window is late,
  i.e. ``watermark >= end - 1 + allowed_lateness``; merging (session) windows
  are merged first and their state combined;
* if it joined none and its timestamp is late too (``ts + lateness <= wm``) it
  is a late element, returned for a side output; an element in a gap between
  sliding windows that is not late is simply dropped;
* the trigger answers each element and timer with CONTINUE / FIRE / PURGE /
  FIRE_AND_PURGE; every emission says ``first`` or ``update``;
* a window's state, trigger state and timers go at its cleanup time,
  ``end - 1 + allowed_lateness`` (event time) or ``end - 1`` (processing time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from service.eventtime.functions import AggregateFunction, Evictor, ProcessWindowFunction
from service.eventtime.timers import Timer, TimerQueue
from service.eventtime.triggers import (
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    Trigger,
    TriggerResult,
)
from service.eventtime.watermarks import MIN_WATERMARK
from service.eventtime.windows import MAX_TIME_MS, TimeWindow, Tumbling, WindowAssigner

# Timers at the same instant fire in namespace order: a window's trigger timer must
# fire before its cleanup timer (Flink fires, then clears), hence the digits.
TRIGGER = "window.0.trigger"
# Shared "no results" list: most elements fire nothing, so nothing is allocated.
# Never appended to: the operator swaps in a fresh list before the first result.
_NONE: list[WindowResult] = []
_MISSING: Any = object()


def _no_aggregate(value: Any, accumulator: Any) -> Any:
    raise TypeError("this window has no aggregate function")


CLEANUP = "window.1.cleanup"
Timing = Literal["first", "update"]


@dataclass(frozen=True)
class WindowSpec:
    """What to compute: a frozen definition, separate from running it."""

    assigner: WindowAssigner
    aggregate: AggregateFunction[Any, Any, Any] | None = None
    process: ProcessWindowFunction | None = None
    trigger: Trigger | None = None
    evictor: Evictor | None = None
    allowed_lateness_ms: int = 0

    def __post_init__(self) -> None:
        if self.allowed_lateness_ms < 0:
            raise ValueError("allowed_lateness_ms must be >= 0")
        if self.aggregate is None and self.process is None:
            raise ValueError("a window needs an aggregate, a process function, or both")
        if self.assigner.is_merging and not self.effective_trigger.can_merge:
            raise ValueError(f"{type(self.effective_trigger).__name__} cannot merge windows")

    @property
    def effective_trigger(self) -> Trigger:
        if self.trigger is not None:
            return self.trigger
        if type(self.assigner).__name__ == "Global":
            return NeverTrigger()
        return EventTimeTrigger() if self.assigner.is_event_time else ProcessingTimeTrigger()

    @property
    def incremental(self) -> bool:
        """Keep one accumulator per window. An evictor needs the elements, so with one
        the window stores them and the aggregate runs over them at firing time."""
        return self.aggregate is not None and self.evictor is None


@dataclass(slots=True)
class WindowEntry:
    """One key's state for one window: contents (an accumulator, or the elements as
    ``[ts, value]``; None once purged), whether it fired since its contents were
    last purged, the trigger's state, and the process function's per-window state."""

    contents: Any
    fired: bool = False
    trigger: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)


class WindowResult(NamedTuple):
    key: str
    window: TimeWindow
    value: Any
    timing: Timing
    watermark_ms: int


class WindowState(Protocol):
    """Where the operator keeps its per-(key, window) entries and session index."""

    def get_window(self, key: str, window: TimeWindow) -> WindowEntry | None: ...

    def put_window(self, key: str, window: TimeWindow, entry: WindowEntry) -> None: ...

    def delete_window(self, key: str, window: TimeWindow) -> None: ...

    def get_sessions(self, key: str) -> list[TimeWindow]: ...

    def put_sessions(self, key: str, windows: list[TimeWindow]) -> None: ...

    def get_key_state(self, key: str) -> dict[str, Any]: ...

    def put_key_state(self, key: str, state: dict[str, Any]) -> None: ...


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
        # The default case (event-time trigger, no merging) needs the trigger only
        # when a window is first seen or already due: skip the call otherwise.
        self._plain = type(self.trigger) is EventTimeTrigger and not spec.assigner.is_merging
        self._incremental = spec.incremental
        self._lateness = spec.allowed_lateness_ms
        self._out: list[WindowResult] = _NONE
        assigner = spec.assigner
        self._tumbling: tuple[int, int] | None = None
        if isinstance(assigner, Tumbling) and assigner.is_event_time:
            self._tumbling = (assigner.size_ms, assigner.offset_ms)
        self._last_window: TimeWindow | None = None
        # Event-time trigger, incremental aggregate, no merging: the fast path.
        self._hot = self._plain and self._incremental
        self._add_value: Callable[[Any, Any], Any] = (
            spec.aggregate.add if spec.aggregate is not None else _no_aggregate
        )

    # -- input -------------------------------------------------------------------

    def process(self, key: str, timestamp_ms: int, value: Any) -> tuple[bool, list[WindowResult]]:
        """Add one element under the current clocks.

        Returns:
            ``(accepted, results)``: ``accepted`` is False for a late element (to be
            side-output or dropped by the caller); ``results`` are firings the
            element caused (count triggers, updates within allowed lateness).
        """
        self._out = _NONE
        if self._tumbling is not None:
            return self._process_tumbling(key, timestamp_ms, value)
        assigner = self.spec.assigner
        element_ts = timestamp_ms if assigner.is_event_time else self.processing_time_ms
        skipped = True
        for window in assigner.assign(element_ts):
            if assigner.is_merging:
                window = self._merge(key, window)
                if self._is_late(window):
                    self._retire(key, window)
                    continue
            elif self._is_late(window):
                continue
            skipped = False
            self._add(key, window, element_ts, value)
        if skipped and assigner.is_event_time:
            late = timestamp_ms + self.spec.allowed_lateness_ms <= self.watermark_ms
            return not late, self._out
        return True, self._out

    def _process_tumbling(
        self, key: str, timestamp_ms: int, value: Any
    ) -> tuple[bool, list[WindowResult]]:
        """:meth:`process` for the most common window, without the general machinery:
        one event-time window per element, found arithmetically and cached."""
        assert self._tumbling is not None
        size, offset = self._tumbling
        start = timestamp_ms - (timestamp_ms - offset) % size
        window = self._last_window
        if window is None or window[0] != start:
            window = self._last_window = TimeWindow(start, start + size)
        watermark_ms = self.watermark_ms
        if start + size - 1 + self._lateness <= watermark_ms:
            late = timestamp_ms + self._lateness <= watermark_ms
            return not late, self._out
        entry = self._state.get_window(key, window)
        if self._hot and entry is not None and start + size - 1 > watermark_ms:
            # An open window that already exists: the trigger has its timer and
            # would answer CONTINUE, so only the accumulator changes.
            entry.contents = self._add_value(value, entry.contents)
            self._state.put_window(key, window, entry)
            return True, self._out
        self._add(key, window, timestamp_ms, value, entry)
        return True, self._out

    def advance_watermark(self, watermark_ms: int) -> list[WindowResult]:
        """Move event time forward; fire due timers in timestamp order."""
        self._out = _NONE
        if watermark_ms > self.watermark_ms:
            self.watermark_ms = watermark_ms
            for timer in self._event_timers.pop_due(watermark_ms):
                self._on_timer(timer, event_time=True)
        return self._out

    def advance_processing_time(self, now_ms: int) -> list[WindowResult]:
        self._out = _NONE
        if now_ms > self.processing_time_ms:
            self.processing_time_ms = now_ms
            for timer in self._processing_timers.pop_due(now_ms):
                self._on_timer(timer, event_time=False)
        return self._out

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
            self._register_cleanup(key, window)
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
        result = self.trigger.on_element(element_ts, window, _Ctx(self, key, window, entry))
        self._apply(key, window, entry, result)

    def _on_timer(self, timer: Timer, *, event_time: bool) -> None:
        window = TimeWindow(timer.window_start_ms, timer.window_end_ms)
        if timer.namespace == CLEANUP:
            self._clear(timer.key, window)
            return
        entry = self._state.get_window(timer.key, window)
        if entry is None:
            return  # purged or merged away; its timers went with it
        ctx = _Ctx(self, timer.key, window, entry)
        if event_time:
            result = self.trigger.on_event_time(timer.time_ms, window, ctx)
        else:
            result = self.trigger.on_processing_time(timer.time_ms, window, ctx)
        self._apply(timer.key, window, entry, result)

    def _apply(
        self, key: str, window: TimeWindow, entry: WindowEntry, result: TriggerResult
    ) -> None:
        has_contents = entry.contents is not None and (self._incremental or entry.contents)
        if result.fire and has_contents:
            timing: Timing = "update" if entry.fired else "first"
            if self._out is _NONE:
                self._out = []
            for value in self._emit(key, window, entry):
                self._out.append(WindowResult(key, window, value, timing, self.watermark_ms))
            entry.fired = True
        if result.purge:
            entry.contents = None
            entry.fired = False
        self._state.put_window(key, window, entry)

    def _emit(self, key: str, window: TimeWindow, entry: WindowEntry) -> list[Any]:
        spec = self.spec
        ctx = _WindowCtx(self, key, window, entry)
        if self._incremental:
            assert spec.aggregate is not None
            result = spec.aggregate.result(entry.contents)
            return [result] if spec.process is None else spec.process.process([result], ctx)
        elements = entry.contents
        if spec.evictor is not None:
            elements = spec.evictor.evict_before(elements, window, ctx)
        values = [value for _, value in elements]
        if spec.aggregate is not None:
            accumulator = spec.aggregate.create()
            for value in values:
                accumulator = spec.aggregate.add(value, accumulator)
            values = [spec.aggregate.result(accumulator)]
        outputs = values if spec.process is None else spec.process.process(values, ctx)
        if spec.evictor is not None:
            elements = spec.evictor.evict_after(elements, window, ctx)
        entry.contents = elements
        if ctx.global_dirty:
            self._state.put_key_state(key, ctx.global_state)
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
        entries = []
        for session in touching:
            entry = self._state.get_window(key, session)
            if entry is not None:
                self.trigger.clear(session, _Ctx(self, key, session, entry))
                entries.append(entry)
            self._delete_cleanup(key, session)
            self._state.delete_window(key, session)
        combined = self._combine(entries)
        self._state.put_sessions(key, [s for s in sessions if s not in touching] + [merged])
        self._register_cleanup(key, merged)
        self.trigger.on_merge(merged, _Ctx(self, key, merged, combined))
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
            trigger=self.trigger.merge_state([e.trigger for e in entries]),
            state=state,
        )

    def _retire(self, key: str, window: TimeWindow) -> None:
        """A new session that is late on arrival: forget it again."""
        sessions = self._state.get_sessions(key)
        if window in sessions:
            self._state.put_sessions(key, [s for s in sessions if s != window])
        if self._state.get_window(key, window) is None:
            self._delete_cleanup(key, window)

    def _clear(self, key: str, window: TimeWindow) -> None:
        entry = self._state.get_window(key, window)
        if entry is not None:
            self.trigger.clear(window, _Ctx(self, key, window, entry))
            self._state.delete_window(key, window)
        if self.spec.assigner.is_merging:
            sessions = self._state.get_sessions(key)
            if window in sessions:
                self._state.put_sessions(key, [s for s in sessions if s != window])

    def _is_late(self, window: TimeWindow) -> bool:
        return self.spec.assigner.is_event_time and self._cleanup_time(window) <= self.watermark_ms

    def _cleanup_time(self, window: TimeWindow) -> int:
        if window.end_ms >= MAX_TIME_MS:
            return MAX_TIME_MS
        if not self.spec.assigner.is_event_time:
            return window.max_timestamp_ms
        return window.max_timestamp_ms + self.spec.allowed_lateness_ms

    def _cleanup_timer(self, key: str, window: TimeWindow) -> Timer:
        return Timer(self._cleanup_time(window), CLEANUP, key, window.start_ms, window.end_ms)

    def _register_cleanup(self, key: str, window: TimeWindow) -> None:
        if window.end_ms < MAX_TIME_MS:
            queue = (
                self._event_timers if self.spec.assigner.is_event_time else self._processing_timers
            )
            queue.register(self._cleanup_timer(key, window))

    def _delete_cleanup(self, key: str, window: TimeWindow) -> None:
        queue = self._event_timers if self.spec.assigner.is_event_time else self._processing_timers
        queue.delete(self._cleanup_timer(key, window))

    def timer(self, key: str, window: TimeWindow, time_ms: int) -> Timer:
        return Timer(time_ms, TRIGGER, key, window.start_ms, window.end_ms)

    def event_timers(self) -> TimerQueue:
        return self._event_timers

    def processing_timers(self) -> TimerQueue:
        return self._processing_timers

    def key_state(self, key: str) -> dict[str, Any]:
        return self._state.get_key_state(key)


class _Ctx:
    """The trigger's view of one key's window."""

    __slots__ = ("_key", "_op", "_window", "state")

    def __init__(self, op: WindowOperator, key: str, window: TimeWindow, entry: WindowEntry):
        self._op = op
        self._key = key
        self._window = window
        self.state = entry.trigger

    @property
    def watermark_ms(self) -> int:
        return self._op.watermark_ms

    @property
    def processing_time_ms(self) -> int:
        return self._op.processing_time_ms

    def register_event_time_timer(self, time_ms: int) -> None:
        self._op.event_timers().register(self._op.timer(self._key, self._window, time_ms))

    def register_processing_time_timer(self, time_ms: int) -> None:
        self._op.processing_timers().register(self._op.timer(self._key, self._window, time_ms))

    def delete_event_time_timer(self, time_ms: int) -> None:
        self._op.event_timers().delete(self._op.timer(self._key, self._window, time_ms))

    def delete_processing_time_timer(self, time_ms: int) -> None:
        self._op.processing_timers().delete(self._op.timer(self._key, self._window, time_ms))


class _WindowCtx:
    """A process-window function's view: key, window, clocks, and its states."""

    def __init__(self, op: WindowOperator, key: str, window: TimeWindow, entry: WindowEntry):
        self._op = op
        self.key = key
        self.window = window
        self.window_state = entry.state
        self._global: dict[str, Any] | None = None

    @property
    def watermark_ms(self) -> int:
        return self._op.watermark_ms

    @property
    def processing_time_ms(self) -> int:
        return self._op.processing_time_ms

    @property
    def global_state(self) -> dict[str, Any]:
        if self._global is None:
            self._global = self._op.key_state(self.key)
        return self._global

    @property
    def global_dirty(self) -> bool:
        return self._global is not None
