"""Keyed process functions, co-process functions and their timer service
(docs/semantics.md, "Process functions" and "Timers"), as Flink's
``KeyedProcessFunction`` / ``KeyedCoProcessFunction``.

A function handles one element at a time with a context that gives the element's
key and timestamp, named keyed state, a per-key timer service in event and
processing time, named outputs (the main one is ``"main"``) and read-only
broadcast state. Timers fire in timestamp order when the watermark (or the
processing time) reaches them, never while an element is being handled.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar, cast

from eddy.eventtime.state import TTL_NAMESPACE, KeyedStates, StateBackend
from eddy.eventtime.timers import Timer, TimerQueue, TimerStore
from eddy.eventtime.watermarks import MIN_WATERMARK, WatermarkStrategy, WatermarkTracker

T = TypeVar("T")
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
    """What a function sees while it handles an element or a timer.

    The attributes below are plain attributes, not properties, because the
    operator sets ``timestamp_ms`` and ``time_domain`` for every record: listed
    here so that ``help(Context)`` shows them.

    Attributes:
        state: the current key's keyed state, typed as declared:
            ``ctx.state(LAST_SEEN)`` is a ``ValueState``'s handle (``get``/``set``/
            ``clear``), a ``ListState``'s (``get``/``add``/``update``/``clear``) or a
            ``MapState``'s (``get``/``put``/``remove``/``contains``/``items``/...).
        timer_service: the current key's timers:
            ``register_event_time_timer(time_ms)``,
            ``register_processing_time_timer(time_ms)``, their ``delete_*`` twins,
            ``current_watermark_ms`` and ``current_processing_time_ms``.
        timestamp_ms: the event time of the element being handled, or the time
            of the timer that fired (``None`` for a broadcast element).
        time_domain: in a timer handler, ``"event_time"`` or
            ``"processing_time"``; ``None`` while an element is handled.
        settings: the agent's settings (its ``AgentSettings`` instance), if it
            declares any.
    """

    def __init__(self, op: ProcessOperator) -> None:
        self._op = op
        self.timer_service = TimerService(op)
        self.state = op.states
        self.timestamp_ms: int | None = None
        self.time_domain: str | None = None
        # The agent's settings (an AgentSettings instance), set by the app.
        self.settings: Any = None

    @property
    def key(self) -> str:
        """The key of the element (or timer) being handled."""
        return self._op.key

    @property
    def source(self) -> tuple[str, int, int] | None:
        """(topic, partition, offset) of the element being handled, if known."""
        return self._op.source

    def output(
        self,
        value: Any,
        output: str = MAIN,
        key: str | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        """Emit ``value`` to a named output (``"main"`` unless said otherwise), with
        the element's (or timer's) time unless ``timestamp_ms`` says otherwise."""
        at = self.timestamp_ms if timestamp_ms is None else timestamp_ms
        self._op.emitted.append(Emitted(output, self._op.key if key is None else key, value, at))

    def send(self, topic: Any, value: Any, key: str | None = None) -> None:
        """Emit ``value`` to an output topic the agent declared (``outputs=[...]``),
        keyed by the current key unless ``key`` is given."""
        self.output(value, output=getattr(topic, "name", topic), key=key)

    @property
    def watermark_ms(self) -> int:
        """This task's event-time clock: every record at or before it is late."""
        return self._op.watermark_ms

    @property
    def processing_time_ms(self) -> int:
        """The wall clock (a fake one in the test driver), in ms since the epoch."""
        return self._op.processing_time_ms

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
    ``process_broadcast_element`` are optional. Handlers of an async agent may be
    ``async def``: the operator awaits them, one at a time, in order."""


class AwaitedOutsideAgentError(TypeError):
    """A handler awaited something where nothing may wait: in the replay CLI's
    synchronous harness, or in a function that is not an async agent."""


def drive(step: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends, synchronously.

    The operator's steps are coroutines so an async agent's handlers can be
    awaited in order; a synchronous function's steps finish at the first send.
    """
    try:
        step.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    step.close()
    raise AwaitedOutsideAgentError(
        "a process function awaited I/O outside an async agent; declare it with "
        "@app.agent (or make the handler synchronous)"
    )


async def _call(handler: Callable[..., Any], *args: Any) -> None:
    result = handler(*args)
    if inspect.isawaitable(result):
        await result


class ProcessOperator:
    """Runs a (co-)process function for the keys of one partition.

    Each entry point exists twice: ``process``/``on_tick``/... run a synchronous
    function; ``process_async``/``on_tick_async``/... also await async handlers.
    One implementation serves both (see :func:`drive`).
    """

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

    @property
    def is_async(self) -> bool:
        """Whether any handler is a coroutine function (an async agent)."""
        names = ("process_element", "process_element1", "process_element2", "on_timer")
        return any(inspect.iscoroutinefunction(getattr(self.function, n, None)) for n in names)

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

    # -- synchronous entry points ----------------------------------------------------

    def process(
        self, key: str, timestamp_ms: int | None, value: Any, input_index: int = 0
    ) -> list[Emitted]:
        """Handle one element of input ``input_index``; then let it move the clock."""
        return drive(self.process_async(key, timestamp_ms, value, input_index))

    def process_element(
        self, key: str, timestamp_ms: int | None, value: Any, input_index: int = 0
    ) -> list[Emitted]:
        """Only the handler: the caller moves the clock once per source record
        (:meth:`observe`), however many elements it gave."""
        self.emitted = []
        drive(self.element_async(key, timestamp_ms, value, input_index))
        return self.emitted

    def process_broadcast(self, value: Any) -> list[Emitted]:
        """A record of the broadcast (control) input: every task sees every one."""
        return drive(self.process_broadcast_async(value))

    def advance_watermark(self, watermark_ms: int) -> list[Emitted]:
        """An explicit watermark (the input's own, or the end of input)."""
        return drive(self.advance_watermark_async(watermark_ms))

    def observe(self, input_index: int, timestamp_ms: int, value: Any = None) -> list[Emitted]:
        """A source record moves the clock once, whatever elements it gave (none,
        if filtered out), as a watermark generated at the source does in Flink."""
        return drive(self.observe_async(input_index, timestamp_ms, value))

    def on_tick(self, now_ms: int) -> list[Emitted]:
        """Processing time passed: periodic watermarks, idleness, processing timers."""
        return drive(self.on_tick_async(now_ms))

    # -- the implementation, awaiting async handlers ------------------------------------

    async def process_async(
        self, key: str, timestamp_ms: int | None, value: Any, input_index: int = 0
    ) -> list[Emitted]:
        self.emitted = []
        await self.element_async(key, timestamp_ms, value, input_index)
        if timestamp_ms is not None:
            await self._advance_from(input_index, timestamp_ms, value)
        return self.emitted

    async def element_async(
        self, key: str, timestamp_ms: int | None, value: Any, input_index: int = 0
    ) -> None:
        """Only the handler, appending to :attr:`emitted`; the caller moves the clock
        once for the source record (several elements may come from one record)."""
        self._bind(key, self.states)
        self._ctx.timestamp_ms = timestamp_ms
        self._ctx.time_domain = None
        handler = self._handlers[0] if len(self._inputs) == 1 else self._handlers[1 + input_index]
        if handler is None:
            raise TypeError(
                f"{type(self.function).__name__} has no handler for input {input_index}"
            )
        await _call(handler, value, self._ctx)

    async def observe_async(
        self, input_index: int, timestamp_ms: int, value: Any = None
    ) -> list[Emitted]:
        self.emitted = []
        await self._advance_from(input_index, timestamp_ms, value)
        return self.emitted

    async def _advance_from(self, input_index: int, timestamp_ms: int, value: Any) -> None:
        if self.tracker is None:
            return
        advanced = self.tracker.on_event(
            self._inputs[input_index], timestamp_ms, value, self.processing_time_ms
        )
        if advanced:
            await self._fire_event_timers(self.tracker.watermark_ms)

    async def process_broadcast_async(self, value: Any) -> list[Emitted]:
        self.emitted = []
        self._bind("", self.states)
        self._bctx.timestamp_ms = None
        await _call(self.function.process_broadcast_element, value, self._bctx)
        return self.emitted

    async def advance_watermark_async(self, watermark_ms: int) -> list[Emitted]:
        self.emitted = []
        await self._fire_event_timers(watermark_ms)
        return self.emitted

    async def on_tick_async(self, now_ms: int) -> list[Emitted]:
        """Processing-time timers that came due while the worker was down fire here,
        on the first tick after a restore."""
        self.emitted = []
        if self.tracker is not None and self.tracker.on_tick(now_ms):
            await self._fire_event_timers(self.tracker.watermark_ms)
        if now_ms > self.processing_time_ms:
            self.processing_time_ms = now_ms
            for timer in self.processing_timers.pop_due(now_ms):
                if timer.namespace.startswith(TTL_NAMESPACE):
                    self.states.key = timer.key
                    self.states.on_ttl_timer(timer)
                else:
                    await self._on_timer(timer, PROCESSING_TIME)
        return self.emitted

    async def _fire_event_timers(self, watermark_ms: int) -> None:
        if watermark_ms <= self.watermark_ms:
            return
        self.watermark_ms = watermark_ms
        for timer in self.event_timers.pop_due(watermark_ms):
            await self._on_timer(timer, EVENT_TIME)

    async def _on_timer(self, timer: Timer, domain: str) -> None:
        on_timer = getattr(self.function, "on_timer", None)
        if on_timer is None:
            return
        self._bind(timer.key, self.states)
        self._ctx.timestamp_ms = timer.time_ms
        self._ctx.time_domain = domain
        await _call(on_timer, timer.time_ms, self._ctx)

    def _bind(self, key: str, states: KeyedStates) -> None:
        self.key = key
        states.key = key
