"""Keyed process functions, co-process functions and their timer service
(semantics E), as Flink's ``KeyedProcessFunction`` / ``KeyedCoProcessFunction``.

A function handles one element at a time with a context that gives the element's
key and timestamp, named keyed state, a per-key timer service in event and
processing time, named outputs (the main one is ``"main"``) and read-only
broadcast state. Timers fire in timestamp order when the watermark (or the
processing time) reaches them, never while an element is being handled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from service.eventtime.state import TTL_NAMESPACE, KeyedStates, StateBackend
from service.eventtime.timers import Timer, TimerQueue, TimerStore
from service.eventtime.watermarks import MIN_WATERMARK, WatermarkStrategy, WatermarkTracker

MAIN = "main"
USER_TIMER = "user"
EVENT_TIME = "event_time"
PROCESSING_TIME = "processing_time"


class Emitted(NamedTuple):
    output: str
    key: str
    value: Any
    timestamp_ms: int | None


class TimerService:
    """Per-key timers of the element (or timer) being handled."""

    def __init__(self, op: ProcessOperator) -> None:
        self._op = op

    @property
    def current_watermark_ms(self) -> int:
        return self._op.watermark_ms

    @property
    def current_processing_time_ms(self) -> int:
        return self._op.processing_time_ms

    def register_event_time_timer(self, time_ms: int) -> None:
        self._op.event_timers.register(Timer(time_ms, USER_TIMER, self._op.key))

    def register_processing_time_timer(self, time_ms: int) -> None:
        self._op.processing_timers.register(Timer(time_ms, USER_TIMER, self._op.key))

    def delete_event_time_timer(self, time_ms: int) -> None:
        """Deleting a timer that does not exist is a no-op, as in Flink."""
        self._op.event_timers.delete(Timer(time_ms, USER_TIMER, self._op.key))

    def delete_processing_time_timer(self, time_ms: int) -> None:
        self._op.processing_timers.delete(Timer(time_ms, USER_TIMER, self._op.key))


class Context:
    """What a function sees while it handles an element or a timer."""

    def __init__(self, op: ProcessOperator) -> None:
        self._op = op
        self.timer_service = TimerService(op)
        self.state = op.states
        self.timestamp_ms: int | None = None
        self.time_domain: str | None = None

    @property
    def key(self) -> str:
        return self._op.key

    @property
    def source(self) -> tuple[str, int, int] | None:
        """(topic, partition, offset) of the element being handled, if known."""
        return self._op.source

    def output(self, value: Any, output: str = MAIN, key: str | None = None) -> None:
        """Emit ``value`` to a named output (``"main"`` unless said otherwise)."""
        self._op.emitted.append(
            Emitted(output, self._op.key if key is None else key, value, self.timestamp_ms)
        )

    def broadcast(self, name: str) -> dict[str, Any]:
        """Broadcast state ``name``, read-only here (a copy: changes are not kept)."""
        return dict(self._op.broadcast_states.get_state(f"broadcast.{name}", "") or {})


class BroadcastContext(Context):
    def broadcast_state(self, name: str) -> dict[str, Any]:
        """Broadcast state ``name``, writable: call :meth:`save_broadcast` after."""
        return self.broadcast(name)

    def save_broadcast(self, name: str, state: dict[str, Any]) -> None:
        self._op.broadcast_states.put_state(f"broadcast.{name}", "", state)


class ProcessFunction(Protocol):
    """One handler per input: ``process_element`` (one input) or
    ``process_element1``/``process_element2`` (co-process); ``on_timer`` and
    ``process_broadcast_element`` are optional."""


class ProcessOperator:
    """Runs a (co-)process function for the keys of one partition."""

    def __init__(
        self,
        function: Any,
        *,
        backend: StateBackend,
        event_timers: TimerStore,
        processing_timers: TimerStore,
        watermark: WatermarkStrategy | None = None,
        inputs: Sequence[str] = ("input",),
    ) -> None:
        self.function = function
        self.event_timers = TimerQueue(event_timers)
        self.processing_timers = TimerQueue(processing_timers)
        self.broadcast_states = backend
        self._strategy = watermark
        self._inputs = tuple(inputs)
        self.tracker = None if watermark is None else WatermarkTracker(watermark, self._inputs)
        self.watermark_ms = MIN_WATERMARK
        self.processing_time_ms = 0
        self.key = ""
        # Where the element being handled came from (topic, partition, offset), when
        # the runtime knows; the harness leaves it None.
        self.source: tuple[str, int, int] | None = None
        self.emitted: list[Emitted] = []
        self.states = KeyedStates(backend, self.processing_timers, lambda: self.processing_time_ms)
        self._ctx = Context(self)
        self._bctx = BroadcastContext(self)
        self._handlers = [
            getattr(function, name, None)
            for name in ("process_element", "process_element1", "process_element2")
        ]
        self.reload(None)

    def reload(self, snapshot: dict[str, Any] | None) -> None:
        self.event_timers.reload()
        self.processing_timers.reload()
        if self._strategy is not None:
            self.tracker = WatermarkTracker(self._strategy, self._inputs)
        self.watermark_ms = MIN_WATERMARK
        if snapshot is not None:
            if self.tracker is not None:
                self.tracker.restore(snapshot)
            self.watermark_ms = int(snapshot.get("emitted_ms", MIN_WATERMARK))

    def snapshot(self) -> dict[str, Any]:
        if self.tracker is not None:
            return self.tracker.snapshot()
        return {"emitted_ms": self.watermark_ms}

    def process(
        self, key: str, timestamp_ms: int | None, value: Any, input_index: int = 0
    ) -> list[Emitted]:
        """Handle one element of input ``input_index``; then let it move the clock."""
        self.emitted = []
        self._bind(key, self.states)
        self._ctx.timestamp_ms = timestamp_ms
        self._ctx.time_domain = None
        handler = self._handlers[0] if len(self._inputs) == 1 else self._handlers[1 + input_index]
        if handler is None:
            raise TypeError(
                f"{type(self.function).__name__} has no handler for input {input_index}"
            )
        handler(value, self._ctx)
        if self.tracker is not None and timestamp_ms is not None:
            advanced = self.tracker.on_event(
                self._inputs[input_index], timestamp_ms, value, self.processing_time_ms
            )
            if advanced:
                self._fire_event_timers(self.tracker.watermark_ms)
        return self.emitted

    def process_broadcast(self, value: Any) -> list[Emitted]:
        """A record of the broadcast (control) input: every task sees every one."""
        self.emitted = []
        self._bind("", self.states)
        self._bctx.timestamp_ms = None
        self.function.process_broadcast_element(value, self._bctx)
        return self.emitted

    def advance_watermark(self, watermark_ms: int) -> list[Emitted]:
        """An explicit watermark (the input's own, or the end of input)."""
        self.emitted = []
        self._fire_event_timers(watermark_ms)
        return self.emitted

    def on_tick(self, now_ms: int) -> list[Emitted]:
        """Processing time passed: periodic watermarks, idleness, processing timers.

        Processing-time timers that came due while the worker was down fire here,
        on the first tick after a restore.
        """
        self.emitted = []
        if self.tracker is not None and self.tracker.on_tick(now_ms):
            self._fire_event_timers(self.tracker.watermark_ms)
        if now_ms > self.processing_time_ms:
            self.processing_time_ms = now_ms
            for timer in self.processing_timers.pop_due(now_ms):
                if timer.namespace.startswith(TTL_NAMESPACE):
                    self.states.key = timer.key
                    self.states.on_ttl_timer(timer)
                else:
                    self._on_timer(timer, PROCESSING_TIME)
        return self.emitted

    def _fire_event_timers(self, watermark_ms: int) -> None:
        if watermark_ms <= self.watermark_ms:
            return
        self.watermark_ms = watermark_ms
        for timer in self.event_timers.pop_due(watermark_ms):
            self._on_timer(timer, EVENT_TIME)

    def _on_timer(self, timer: Timer, domain: str) -> None:
        on_timer = getattr(self.function, "on_timer", None)
        if on_timer is None:
            return
        self._bind(timer.key, self.states)
        self._ctx.timestamp_ms = timer.time_ms
        self._ctx.time_domain = domain
        on_timer(timer.time_ms, self._ctx)

    def _bind(self, key: str, states: KeyedStates) -> None:
        self.key = key
        states.key = key
