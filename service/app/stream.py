"""The fluent way to write an agent: ``app.stream(topic)...``.

A stream is a frozen description: each call returns a new stream with one more
step, and nothing runs until a worker (or the test driver, or the replay CLI)
builds the app. Stateless steps (``filter``, ``map``, ``flat_map``) fuse into
the keyed step after them; ``key_by`` with a key other than the one the topic
is partitioned by repartitions through a topic, carrying watermarks across; the
keyed step (a window, a process function, a join, an enrichment, a sink) runs
with keyed state in RocksDB and commits exactly once with the input offsets.

An agent has at most one keyed step: to key its results again, write them
``.to(topic)`` and start another stream from that topic.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import UnionType
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from eddy.app.topic import KeySpec, Topic
from eddy.eventtime.descriptors import StateDescriptor
from eddy.eventtime.functions import AggregateFunction, Evictor, ProcessWindowFunction, Reduce
from eddy.eventtime.triggers import Trigger
from eddy.eventtime.watermarks import WatermarkStrategy
from eddy.eventtime.window_state import WindowResult
from eddy.eventtime.windows import WindowAssigner

if TYPE_CHECKING:
    from eddy.app.app import App
    from eddy.pipeline.pgsink import PostgresUpsert

T = TypeVar("T")
U = TypeVar("U")


# -- steps ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stateless:
    kind: str  # filter | map | flat_map
    fn: Callable[[Any], Any]
    out_type: Any = None


@dataclass(frozen=True)
class KeyBy:
    key: KeySpec
    field_name: str | None


@dataclass(frozen=True)
class WindowStep:
    assigner: WindowAssigner
    trigger: Trigger | None = None
    evictor: Evictor | None = None
    allowed_lateness_ms: int = 0
    late_to: Topic[Any] | None = None
    aggregate: AggregateFunction[Any, Any, Any] | None = None
    process: ProcessWindowFunction | None = None
    result_type: Any = None


@dataclass(frozen=True)
class ProcessStep:
    function: Any
    states: tuple[StateDescriptor[Any], ...] = ()
    side_outputs: Mapping[str, Topic[Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class JoinStep:
    kind: str  # interval | window | cogroup | coprocess
    other: Stream[Any]
    function: Any = None
    lower_ms: int = 0
    upper_ms: int = 0
    assigner: WindowAssigner | None = None
    allowed_lateness_ms: int = 0
    states: tuple[StateDescriptor[Any], ...] = ()


@dataclass(frozen=True)
class BroadcastStep:
    broadcast: BroadcastStream[Any]
    function: Any
    states: tuple[StateDescriptor[Any], ...] = ()
    side_outputs: Mapping[str, Topic[Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class EnrichStep:
    lookup: Callable[[Any], Awaitable[Any]]
    into: Callable[[Any, Any], Any]
    fallback: Any = None
    capacity: int = 100
    timeout_ms: int = 5_000
    retries: int = 2
    ordered: bool = True
    on_close: Callable[[], Awaitable[None]] | None = None


@dataclass(frozen=True)
class SinkStep:
    upsert: PostgresUpsert


@dataclass(frozen=True)
class ToStep:
    topic: Topic[Any]


@dataclass(frozen=True)
class QueryableStep:
    retention_ms: int | None = None
    per_key: int | None = None


KEYED_STEPS = (WindowStep, ProcessStep, JoinStep, BroadcastStep, EnrichStep, SinkStep)
TERMINALS = (ToStep, QueryableStep)


def return_type(fn: Any, *, element: bool = False) -> Any:
    """A function's annotated return type (for ``flat_map``, the element type of
    the iterable it returns), or None when it has none (a lambda)."""
    target = fn if callable(fn) and not isinstance(fn, type) else None
    if target is not None and not inspect.isroutine(target):
        target = type(target).__call__  # a callable object: its __call__'s hints
    try:
        hints = get_type_hints(target) if target is not None else {}
    except Exception:  # unresolvable annotations: treat as unannotated
        hints = {}
    found = _without_none(hints.get("return"))
    if found is None or not element:
        return found
    args = get_args(found)
    return args[0] if get_origin(found) is not None and args else None


def _without_none(tp: Any) -> Any:
    """``X | None`` -> ``X`` (a function that may emit nothing still emits X)."""
    if get_origin(tp) in (Union, UnionType):
        rest = [a for a in get_args(tp) if a is not type(None)]
        return rest[0] if len(rest) == 1 else tp
    return None if tp is type(None) else tp


# -- streams ----------------------------------------------------------------------------


class Stream(Generic[T]):
    """Records of one topic, transformed step by step. See the module docstring."""

    def __init__(
        self,
        app: App,
        topic: Topic[Any],
        name: str | None,
        watermark: WatermarkStrategy | None,
        steps: tuple[Any, ...] = (),
        group_id: str | None = None,
    ) -> None:
        self.app = app
        self.topic = topic
        self.name = name
        self.watermark = watermark
        self.steps = steps
        self.group_id = group_id

    def _then(self, step: Any) -> Any:
        steps = (*self.steps, step)
        return Stream(self.app, self.topic, self.name, self.watermark, steps, self.group_id)

    # -- stateless ------------------------------------------------------------------------

    def filter(self, predicate: Callable[[T], bool]) -> Stream[T]:
        """Keep the records ``predicate`` is true for. The rest still move the
        watermark, as in Flink, where watermarks are made at the source."""
        result: Stream[T] = self._then(Stateless("filter", predicate))
        return result

    def map(self, fn: Callable[[T], U]) -> Stream[U]:
        """One value per record. Annotate ``fn``'s return type to keep values typed
        across a repartition (``def f(c: Click) -> Visit``)."""
        result: Stream[U] = self._then(Stateless("map", fn, return_type(fn)))
        return result

    def flat_map(self, fn: Callable[[T], Iterable[U]]) -> Stream[U]:
        """Zero or more values per record, each with the record's event time."""
        result: Stream[U] = self._then(Stateless("flat_map", fn, return_type(fn, element=True)))
        return result

    def key_by(self, key: str | Callable[[T], str]) -> Stream[T]:
        """Key the stream by a field of its values, or by a function of them.

        If the topic is not partitioned by this key (or a ``map`` changed the
        values first), the records go through a repartition topic, so that all
        records of one key meet in one task.
        """
        result: Stream[T] = self._then(KeyBy(key, key if isinstance(key, str) else None))
        return result

    # -- keyed steps -------------------------------------------------------------------

    def window(
        self,
        assigner: WindowAssigner,
        *,
        trigger: Trigger | None = None,
        evictor: Evictor | None = None,
        allowed_lateness_ms: int = 0,
    ) -> WindowedStream[T]:
        """Windows per key: tumbling, sliding, session or global (count windows)."""
        step = WindowStep(assigner, trigger, evictor, allowed_lateness_ms)
        return WindowedStream(self, step)

    def count_window(
        self, size: int, slide: int | None = None, *, timeout_ms: int | None = None
    ) -> WindowedStream[T]:
        """Flink's ``countWindow``: every ``size`` elements per key (tumbling), or
        every ``slide`` elements over the last ``size`` (sliding); ``timeout_ms``
        of processing time fires a window that stopped filling up."""
        from eddy.eventtime.spec import count_window

        assigner, trigger, evictor = count_window(size, slide, timeout_ms)
        return WindowedStream(self, WindowStep(assigner, trigger, evictor))

    def process(
        self,
        function: Any,
        *,
        states: Sequence[StateDescriptor[Any]] = (),
        side_outputs: Mapping[str, Topic[Any]] | None = None,
    ) -> Stream[Any]:
        """A keyed process function: ``process_element(value, ctx)`` and, for
        timers, ``on_timer(timestamp_ms, ctx)``. ``ctx.output(v)`` emits to this
        stream; ``ctx.output(v, "name")`` to ``side_outputs["name"]``."""
        result: Stream[Any] = self._then(
            ProcessStep(function, tuple(states), dict(side_outputs or {}))
        )
        return result

    def interval_join(
        self,
        other: Stream[U],
        *,
        lower_ms: int,
        upper_ms: int,
        join: Callable[[T, U], Any],
    ) -> Stream[Any]:
        """Pairs ``(a, b)`` of one key with ``a.ts + lower_ms <= b.ts <= a.ts + upper_ms``."""
        if lower_ms > upper_ms:
            raise ValueError("interval_join: lower_ms must not exceed upper_ms")
        step = JoinStep("interval", other, join, lower_ms=lower_ms, upper_ms=upper_ms)
        result: Stream[Any] = self._then(step)
        return result

    def window_join(
        self,
        other: Stream[U],
        assigner: WindowAssigner,
        *,
        join: Callable[..., Any] | None = None,
        cogroup: Callable[..., Any] | None = None,
        allowed_lateness_ms: int = 0,
    ) -> Stream[Any]:
        """Both streams' records of one key in the same window: ``join(a, b)`` gets
        every pair when the window fires, ``cogroup(a_list, b_list)`` both lists
        once; either may take the window's context as a third argument, and may
        return None to emit nothing."""
        if (join is None) == (cogroup is None):
            raise ValueError("window_join: give exactly one of join= and cogroup=")
        kind, function = ("window", join) if join is not None else ("cogroup", cogroup)
        step = JoinStep(
            kind, other, function, assigner=assigner, allowed_lateness_ms=allowed_lateness_ms
        )
        result: Stream[Any] = self._then(step)
        return result

    def connect(self, other: Stream[U] | BroadcastStream[U]) -> Connected[T, U]:
        """Two inputs into one function: another keyed stream (a co-process
        function) or a broadcast stream (broadcast state)."""
        return Connected(self, other)

    def enrich(
        self,
        lookup: Callable[[T], Awaitable[Any]],
        *,
        into: Callable[[T, Any], U],
        fallback: Any = None,
        capacity: int = 100,
        timeout_ms: int = 5_000,
        retries: int = 2,
        ordered: bool = True,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> Stream[U]:
        """Look each record up in an external service (``await lookup(value)``) and
        emit ``into(value, answer)``; ``fallback`` stands in for an answer that is
        missing (None), failing after ``retries`` or later than ``timeout_ms``.
        At most ``capacity`` lookups per partition are in flight; results leave in
        input order (``ordered``) or as they finish, never across a watermark."""
        step = EnrichStep(lookup, into, fallback, capacity, timeout_ms, retries, ordered, on_close)
        result: Stream[U] = self._then(step)
        return result

    # -- where results go -----------------------------------------------------------------

    def to(self, topic: Topic[Any]) -> Stream[T]:
        """Send every value to ``topic``, in the checkpoint's Kafka transaction."""
        result: Stream[T] = self._then(ToStep(topic))
        self.app.register(result)
        return result

    def sink(self, upsert: PostgresUpsert) -> Stream[T]:
        """Upsert every value into PostgreSQL (idempotent; see PostgresUpsert)."""
        result: Stream[T] = self._then(SinkStep(upsert))
        self.app.register(result)
        return result

    def queryable(
        self, *, retention_ms: int | None = None, per_key: int | None = None
    ) -> Stream[T]:
        """Serve the window results over REST, each for ``retention_ms`` after it was
        last written by the worker's clock (default ``EDDY_RESULTS_RETENTION_MS``),
        and at most the newest ``per_key`` windows of a key (default
        ``EDDY_RESULTS_PER_KEY``: no cap)."""
        result: Stream[T] = self._then(QueryableStep(retention_ms, per_key))
        self.app.register(result)
        return result


class WindowedStream(Generic[T]):
    """A keyed stream in windows, waiting for what to compute per window."""

    def __init__(self, stream: Stream[T], step: WindowStep) -> None:
        self._stream = stream
        self._step = step

    def _with(self, **changes: Any) -> WindowedStream[T]:
        return WindowedStream(self._stream, _replace(self._step, **changes))

    def trigger(self, trigger: Trigger) -> WindowedStream[T]:
        return self._with(trigger=trigger)

    def evictor(self, evictor: Evictor) -> WindowedStream[T]:
        return self._with(evictor=evictor)

    def allowed_lateness(self, ms: int) -> WindowedStream[T]:
        return self._with(allowed_lateness_ms=ms)

    def late_to(self, topic: Topic[Any]) -> WindowedStream[T]:
        """Records too late for every window they belong to go to ``topic``, with
        their original bytes (Flink's side output of late data)."""
        return self._with(late_to=topic)

    def aggregate(
        self,
        aggregate: AggregateFunction[Any, Any, U],
        *,
        process: ProcessWindowFunction | None = None,
    ) -> Stream[WindowResult]:
        """Incremental aggregation per window; with ``process``, its ``process(
        [aggregate result], ctx)`` shapes what the window emits."""
        result_type = _window_result_type(aggregate, process)
        step = _replace(self._step, aggregate=aggregate, process=process, result_type=result_type)
        result: Stream[WindowResult] = self._stream._then(step)
        return result

    def reduce(self, fn: Callable[[Any, Any], Any], *, of: Callable[[T], Any] | None = None) -> Any:
        """``fn(a, b)`` over the window's values (or ``of(value)``)."""
        return self.aggregate(Reduce(fn) if of is None else Reduce(fn, of))

    def process(self, function: ProcessWindowFunction) -> Stream[WindowResult]:
        """A process-window function over all the window's elements."""
        step = _replace(
            self._step, process=function, result_type=_window_result_type(None, function)
        )
        result: Stream[WindowResult] = self._stream._then(step)
        return result


class BroadcastStream(Generic[T]):
    """A topic every task reads whole (control records, rules, thresholds)."""

    def __init__(self, topic: Topic[T]) -> None:
        self.topic = topic


class Connected(Generic[T, U]):
    def __init__(self, stream: Stream[T], other: Stream[U] | BroadcastStream[U]) -> None:
        self._stream = stream
        self._other = other

    def process(
        self,
        function: Any,
        *,
        states: Sequence[StateDescriptor[Any]] = (),
        side_outputs: Mapping[str, Topic[Any]] | None = None,
    ) -> Stream[Any]:
        """With a broadcast stream: ``process_element(value, ctx)`` and
        ``process_broadcast_element(value, ctx)``; with a keyed stream:
        ``process_element1``/``process_element2``."""
        if isinstance(self._other, BroadcastStream):
            step: Any = BroadcastStep(
                self._other, function, tuple(states), dict(side_outputs or {})
            )
        elif side_outputs:
            raise ValueError("a co-process function emits to its main output only")
        else:
            step = JoinStep("coprocess", self._other, function, states=tuple(states))
        result: Stream[Any] = self._stream._then(step)
        return result


def _replace(step: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(step, **changes)


def _window_result_type(aggregate: AggregateFunction[Any, Any, Any] | None, process: Any) -> Any:
    """What one window emits: a process function's annotated element type, else
    the aggregate's declared ``result_type`` (None: untyped)."""
    if process is not None:
        return return_type(getattr(process, "process", None), element=True)
    return getattr(aggregate, "result_type", None)
