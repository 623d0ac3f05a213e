"""Compiling an agent onto stages: what the runtime runs.

A fluent chain or an ``@app.agent`` becomes one stage (a keyed step with its
stateless steps fused in), or two when ``key_by`` repartitions: a re-keying
stage writing to ``<app_id>-<agent>-repartition`` with watermark markers, then
the keyed stage reading it. Both ways of writing an agent end on the same
operators: :class:`~eddy.pipeline.windowed.WindowedAggregation`,
:class:`~eddy.pipeline.keyed.KeyedProcess` and the others in
``service/pipeline/``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from pydantic import BaseModel

from eddy.app.agent import AgentDef, agent_function
from eddy.app.settings import AgentSettings
from eddy.app.stream import (
    KEYED_STEPS,
    BroadcastStep,
    EnrichStep,
    JoinStep,
    KeyBy,
    ProcessStep,
    QueryableStep,
    SinkStep,
    Stateless,
    Stream,
    ToStep,
    WindowStep,
    return_type,
)
from eddy.app.topic import Topic
from eddy.errors import ConfigError
from eddy.eventtime import BoundedOutOfOrderness, WindowSpec
from eddy.eventtime.descriptors import StateDescriptor
from eddy.eventtime.functions import field as accessor
from eddy.eventtime.joins import IntervalJoin, window_cogroup, window_join
from eddy.eventtime.watermarks import (
    FromUpstream,
    NoWatermarks,
    PerInput,
    WatermarkStrategy,
)
from eddy.eventtime.windows import Global
from eddy.pipeline.base import Pipeline, Target
from eddy.pipeline.enrich import AsyncEnrichment
from eddy.pipeline.keyed import MAIN, KeyedProcess
from eddy.pipeline.pgsink import PostgresSink
from eddy.pipeline.repartition import Repartition
from eddy.pipeline.source import Source
from eddy.pipeline.stateless import Forward
from eddy.pipeline.windowed import MAX_RETENTION_MS, WindowedAggregation, window_record
from eddy.schemas.base import SchemaSerde
from eddy.schemas.binder import SchemaBinder
from eddy.serde import Json, JsonModel, Serde
from eddy.settings import Settings
from eddy.tables.schema import StateSchema, json_schema


class PlanError(ConfigError):
    """An agent's definition cannot run as written; the message says what to change."""


@dataclass(frozen=True)
class View:
    """Something an agent serves over REST: its window results, or one state."""

    agent: str
    stage: str
    kind: str  # "windows" | "state"
    key_field: str = "key"
    result_type: Any = None
    descriptor: StateDescriptor[Any] | None = None


@dataclass(frozen=True)
class Internal:
    """A topic Eddy creates for an agent (repartition), with exact partitions."""

    name: str
    partitions: int


@dataclass
class Compiled:
    """One agent, ready to run."""

    name: str
    stages: list[Pipeline]
    views: list[View] = field(default_factory=list)
    topics: list[Topic[Any]] = field(default_factory=list)
    internal: list[Internal] = field(default_factory=list)
    settings: AgentSettings | None = None
    group_id: str | None = None  # every stage's consumer group; None: one per stage


@dataclass(frozen=True)
class Builder:
    """What compiling needs to know of the deployment."""

    settings: Settings
    schemas: SchemaBinder = field(default_factory=SchemaBinder, compare=False)

    def physical(self, topic: Topic[Any]) -> str:
        return self.settings.topic(topic.name)

    def codec(self, topic: Topic[Any]) -> Serde[Any]:
        """How a source reads the topic's values (a registry's serde, bound)."""
        if isinstance(topic.serde, SchemaSerde):
            return self.schemas.bind(topic.serde, f"{self.physical(topic)}-value", topic.value)
        return topic.codec

    def key_codec(self, topic: Topic[Any]) -> Serde[Any] | None:
        if isinstance(topic.key_serde, SchemaSerde):
            return self.schemas.bind(topic.key_serde, f"{self.physical(topic)}-key", None)
        return topic.key_serde

    def target(
        self, topic: Topic[Any], steps: Callable[[Any], Iterable[Any]] | None = None
    ) -> Target:
        physical = self.physical(topic)
        encode = topic.codec.encode
        if isinstance(topic.serde, SchemaSerde):
            encode = self.schemas.bind_output(topic.serde, f"{physical}-value", topic.value).encode
        encode_key = None
        if isinstance(topic.key_serde, SchemaSerde):
            encode_key = self.schemas.bind_output(topic.key_serde, f"{physical}-key", None).encode
        elif topic.key_serde is not None:
            encode_key = topic.key_serde.encode
        return Target(physical, encode, steps, encode_key)

    def internal(self, agent: str, suffix: str) -> str:
        return f"{self.settings.app_id}-{agent}-{suffix}"


# -- fluent chains ------------------------------------------------------------------------


def compile_stream(
    b: Builder, name: str, head: Stream[Any], terminals: Sequence[tuple[Any, Sequence[Any]]]
) -> Compiled:
    """Args:
    head: the chain up to and including its keyed step (all of it if none).
    terminals: each ``to``/``sink``/``queryable`` with the steps before it.
    """
    steps = list(head.steps)
    keyed_at = next((i for i, s in enumerate(steps) if isinstance(s, KEYED_STEPS)), None)
    pre = steps if keyed_at is None else steps[:keyed_at]
    outputs: list[tuple[Topic[Any], Sequence[Stateless]]] = []
    for terminal, post in terminals:
        if any(not isinstance(s, Stateless) for s in post):
            raise PlanError(
                f"agent {name}: one keyed step per agent; to key its results again, "
                "write them .to(topic) and start another app.stream(topic)"
            )
        if isinstance(terminal, ToStep):
            outputs.append((terminal.topic, post))
    queryable = [t for t, _ in terminals if isinstance(t, QueryableStep)]
    sinks = [t for t, _ in terminals if isinstance(t, SinkStep)]
    compiled = Compiled(
        name, [], topics=[head.topic, *(t for t, _ in outputs)], group_id=head.group_id
    )
    keyed = None if keyed_at is None else steps[keyed_at]
    windowed = isinstance(keyed, WindowStep) or (
        isinstance(keyed, JoinStep) and keyed.kind in ("window", "cogroup")
    )
    if queryable and not windowed:
        raise PlanError(
            f"agent {name}: .queryable() serves window results; a process function's "
            "state is served by declaring it queryable (ValueState(..., queryable=True))"
        )
    if sinks:
        if keyed is not None or outputs or len(sinks) > 1:
            raise PlanError(f"agent {name}: .sink(...) takes the whole stream, once")
        source = _input(b, name, head, pre, compiled, keyed=False)
        sink_steps = _compose([s for s in terminals[0][1] if isinstance(s, Stateless)])
        source = dataclasses.replace(source, steps=_then(source.steps, sink_steps))
        compiled.stages.append(PostgresSink(name, source, sinks[0].upsert))
        return compiled
    targets = tuple(b.target(topic, _compose(post)) for topic, post in outputs)
    if keyed is None:
        source = _input(b, name, head, pre, compiled, keyed=False)
        compiled.stages.append(Forward(name, source, targets))
    elif isinstance(keyed, WindowStep):
        _window(b, name, head, pre, keyed, targets, queryable, compiled)
    elif isinstance(keyed, ProcessStep):
        _process(b, name, head, pre, keyed, targets, compiled)
    elif isinstance(keyed, JoinStep):
        _join(b, name, head, pre, keyed, targets, queryable, compiled)
    elif isinstance(keyed, BroadcastStep):
        _broadcast(b, name, head, pre, keyed, targets, compiled)
    elif isinstance(keyed, EnrichStep):
        _enrich(b, name, head, pre, keyed, targets, compiled)
    return compiled


def _then(
    first: Callable[[Any], Iterable[Any]] | None, second: Callable[[Any], Iterable[Any]] | None
) -> Callable[[Any], Iterable[Any]] | None:
    if first is None or second is None:
        return first or second
    return lambda value: [out for mid in first(value) for out in second(mid)]


def _window(
    b: Builder,
    name: str,
    head: Stream[Any],
    pre: Sequence[Any],
    step: WindowStep,
    targets: tuple[Target, ...],
    queryable: Sequence[QueryableStep],
    compiled: Compiled,
) -> None:
    source = _input(b, name, head, pre, compiled, keyed=True)
    spec = _definition(
        name,
        lambda: WindowSpec(
            step.assigner,
            aggregate=step.aggregate,
            process=step.process,
            trigger=step.trigger,
            evictor=step.evictor,
            allowed_lateness_ms=step.allowed_lateness_ms,
        ),
    )
    # Count windows (one global window per key) count elements: no clock needed.
    counted = isinstance(spec.assigner, Global)
    watermark = (
        _stage_watermark(b, name, head, source, needed=spec.assigner.is_event_time and not counted)
        or NoWatermarks()
    )
    key_field = _key_field(head, pre)
    retention_ms, per_key = _retention(b, name, queryable)
    if step.late_to is not None:
        compiled.topics.append(step.late_to)
    compiled.stages.append(
        WindowedAggregation(
            name,
            (source,),
            watermark,
            spec,
            outputs=targets,
            late_output=None if step.late_to is None else b.physical(step.late_to),
            key_field=key_field,
            queryable=bool(queryable),
            results_retention_ms=retention_ms,
            results_per_key=per_key,
            firings_per_checkpoint=b.settings.window_firings_per_checkpoint,
            revive=_reviver(_element_type(head, pre)),
        )
    )
    if queryable:
        compiled.views.append(View(name, name, "windows", key_field, step.result_type))


def _process(
    b: Builder,
    name: str,
    head: Stream[Any],
    pre: Sequence[Any],
    step: ProcessStep,
    targets: tuple[Target, ...],
    compiled: Compiled,
) -> None:
    source = _input(b, name, head, pre, compiled, keyed=True)
    outputs = _side_outputs(b, targets, step.side_outputs, compiled)
    compiled.stages.append(
        KeyedProcess(
            name,
            (source,),
            _as_process_function(step.function),
            outputs,
            watermark=_stage_watermark(b, name, head, source, needed=False),
            states=_schemas(step.states),
        )
    )
    compiled.views += _state_views(name, step.states)


def _retention(b: Builder, name: str, queryable: Sequence[QueryableStep]) -> tuple[int, int | None]:
    """How long an agent keeps its queryable results, and how many per key: its
    ``.queryable(...)`` arguments, else the settings."""
    retention_ms = next((q.retention_ms for q in queryable if q.retention_ms is not None), None)
    per_key = next((q.per_key for q in queryable if q.per_key is not None), None)
    if retention_ms is not None and not 1 <= retention_ms <= MAX_RETENTION_MS:
        raise PlanError(
            f"agent {name}: .queryable(retention_ms=...) must be from 1 to "
            f"{MAX_RETENTION_MS} (got {retention_ms})"
        )
    if per_key is not None and per_key < 1:
        raise PlanError(f"agent {name}: .queryable(per_key=...) must be >= 1 (got {per_key})")
    return retention_ms or b.settings.results_retention_ms, per_key or b.settings.results_per_key


def _definition(name: str, build: Callable[[], WindowSpec]) -> WindowSpec:
    """A window definition the event-time core refuses (its checks raise
    ValueError: too many windows per record, a negative lateness), as one line
    naming the agent rather than a traceback."""
    try:
        return build()
    except ValueError as exc:
        raise PlanError(f"agent {name}: {exc}") from None


def _join(
    b: Builder,
    name: str,
    head: Stream[Any],
    pre: Sequence[Any],
    step: JoinStep,
    targets: tuple[Target, ...],
    queryable: Sequence[QueryableStep],
    compiled: Compiled,
) -> None:
    other = step.other
    if any(not isinstance(s, (Stateless, KeyBy)) for s in other.steps):
        raise PlanError(f"agent {name}: the other side of a join may only filter, map, key_by")
    left = _input(b, name, head, pre, compiled, keyed=True, join=True)
    right = _input(b, name, other, other.steps, compiled, keyed=True, join=True)
    compiled.topics.append(other.topic)
    if left.topic == right.topic:
        raise PlanError(f"agent {name}: a join needs two different topics")
    watermark: Any = None
    if step.kind != "coprocess" or head.watermark or other.watermark:
        watermark = _join_watermark(name, head, other, left.topic, right.topic)
    revive = (_reviver(_element_type(head, pre)), _reviver(_element_type(other, other.steps)))
    key_field = _key_field(head, pre)
    if step.kind in ("window", "cogroup"):
        assigner = step.assigner
        assert assigner is not None
        make = window_join if step.kind == "window" else window_cogroup
        spec = _definition(name, lambda: make(assigner, step.function, step.allowed_lateness_ms))
        retention_ms, per_key = _retention(b, name, queryable)
        stage: Pipeline = WindowedAggregation(
            name,
            (left, right),
            watermark,
            spec,
            outputs=tuple(_result_values(t) for t in targets),
            key_field=key_field,
            queryable=bool(queryable),
            results_retention_ms=retention_ms,
            results_per_key=per_key,
            firings_per_checkpoint=b.settings.window_firings_per_checkpoint,
            revive=_side_reviver(*revive),
        )
        if queryable:
            result_type = return_type(step.function)
            compiled.views.append(View(name, name, "windows", key_field, result_type))
    else:
        function = step.function
        if step.kind == "interval":
            function = IntervalJoin(step.lower_ms, step.upper_ms, step.function, *revive)
        stage = KeyedProcess(
            name, (left, right), function, {MAIN: targets}, watermark, states=_schemas(step.states)
        )
        compiled.views += _state_views(name, step.states)
    compiled.stages.append(stage)


def _broadcast(
    b: Builder,
    name: str,
    head: Stream[Any],
    pre: Sequence[Any],
    step: BroadcastStep,
    targets: tuple[Target, ...],
    compiled: Compiled,
) -> None:
    source = _input(b, name, head, pre, compiled, keyed=True)
    control = step.broadcast.topic
    compiled.topics.append(control)
    outputs = _side_outputs(b, targets, step.side_outputs, compiled)
    compiled.stages.append(
        KeyedProcess(
            name,
            (source,),
            _as_process_function(step.function),
            outputs,
            watermark=_stage_watermark(b, name, head, source, needed=False),
            broadcast=Source(b.physical(control), b.codec(control)),
            states=_schemas(step.states, broadcast=True),
        )
    )
    compiled.views += _state_views(name, step.states)


def _side_outputs(
    b: Builder,
    main: tuple[Target, ...],
    side: Mapping[str, Topic[Any]],
    compiled: Compiled,
) -> dict[str, tuple[Target, ...]]:
    """Outputs by name: ``main``, each side output by its name (``ctx.output(v,
    "name")``) and by its topic's name (``ctx.send(topic, v)``)."""
    outputs = {MAIN: main}
    for output, topic in side.items():
        outputs[output] = (b.target(topic),)
        outputs.setdefault(topic.name, outputs[output])
        compiled.topics.append(topic)
    return outputs


def _enrich(
    b: Builder,
    name: str,
    head: Stream[Any],
    pre: Sequence[Any],
    step: EnrichStep,
    targets: tuple[Target, ...],
    compiled: Compiled,
) -> None:
    source = _input(b, name, head, pre, compiled, keyed=False)
    watermark = _stage_watermark(b, name, head, source, needed=False) or BoundedOutOfOrderness(0)
    compiled.stages.append(
        AsyncEnrichment(
            name,
            source,
            lookup=step.lookup,
            enrich=step.into,
            fallback=step.fallback,
            outputs=targets,
            watermark=watermark,
            capacity=step.capacity,
            timeout_ms=step.timeout_ms,
            retries=step.retries,
            ordered=step.ordered,
            on_close=step.on_close,
        )
    )


# -- inputs, keys, watermarks ---------------------------------------------------------------


def _input(
    b: Builder,
    name: str,
    head: Stream[Any],
    pre: Sequence[Any],
    compiled: Compiled,
    *,
    keyed: bool,
    join: bool = False,
) -> Source:
    """The source the keyed (or only) stage reads; a re-keying stage first if
    ``key_by`` changes the partitioning."""
    topic = head.topic
    key_at = max((i for i, s in enumerate(pre) if isinstance(s, KeyBy)), default=None)
    stateless = [s for s in pre if isinstance(s, Stateless)]
    if key_at is None:
        if keyed and not topic.keyed:
            raise PlanError(
                f"agent {name}: keyed state needs a key, and topic {topic.name} declares "
                "none: declare Topic(key=...) if producers key its records, or call "
                ".key_by(...) (which repartitions)"
            )
        return _source(b, topic, stateless, check_key=keyed)
    key_by: KeyBy = pre[key_at]
    before = [s for s in pre[:key_at] if isinstance(s, Stateless)]
    after = [s for s in pre[key_at + 1 :] if isinstance(s, Stateless)]
    if not keyed:  # nothing keeps state: key_by only names the output records' key
        return _source(b, topic, stateless, check_key=False, key=accessor(key_by.key))
    if _same_key(topic, key_by, before):
        return _source(b, topic, stateless, check_key=True)
    if join:
        raise PlanError(
            f"agent {name}: a join side cannot repartition yet; key topic "
            f"{topic.name} by the join key, or write the re-keyed stream .to(topic) and join that"
        )
    return _repartitioned(b, name, head, before, after, key_by, compiled)


def _repartitioned(
    b: Builder,
    name: str,
    head: Stream[Any],
    before: list[Stateless],
    after: list[Stateless],
    key_by: KeyBy,
    compiled: Compiled,
) -> Source:
    topic = head.topic
    element = _serde_of(_type_after(topic.value, before))
    internal = b.internal(name, "repartition")
    upstream = _source(b, topic, before, check_key=False, key=accessor(key_by.key))
    upstream = Source(
        upstream.topic,
        upstream.serde,
        None,
        upstream.timestamp_ms,
        upstream.steps,
        upstream.key,
        element,
    )
    watermark = _require_watermark(name, head)
    compiled.stages.append(
        Repartition(f"{name}.repartition", upstream, Target(internal, element.encode), watermark)
    )
    compiled.internal.append(Internal(internal, b.settings.partitions))
    return Source(internal, element, None, None, _compose(after), None)


def _source(
    b: Builder,
    topic: Topic[Any],
    steps: list[Stateless],
    *,
    check_key: bool,
    key: Callable[[Any], str] | None = None,
) -> Source:
    return Source(
        b.physical(topic),
        b.codec(topic),
        record_key=_decoded_field(topic, topic.key) if check_key else None,
        timestamp_ms=_decoded_field(topic, topic.timestamp),
        steps=_compose(steps),
        key=key,
        key_serde=b.key_codec(topic),
        require_key=check_key and topic.kafka_key,
    )


def _decoded_field(topic: Topic[Any], spec: Any) -> Callable[[Any], Any] | None:
    """How a source reads ``spec`` (the topic's key or timestamp) from the values
    the topic's own codec decoded. Those are instances of its model, so a field is
    read with ``attrgetter``: no Python frame, and this runs once per record."""
    if spec is None:
        return None
    model = topic.value
    decodes_model = topic.serde is None or isinstance(topic.serde, SchemaSerde)
    if isinstance(spec, str) and decodes_model and _is_model(model):
        return attrgetter(spec)
    return accessor(spec)


def _same_key(topic: Topic[Any], key_by: KeyBy, before: list[Stateless]) -> bool:
    """``key_by`` keys by what the topic is already partitioned by (and no step
    before it changed the values)."""
    if topic.key is None or any(s.kind != "filter" for s in before):
        return False
    return key_by.key is topic.key or (isinstance(key_by.key, str) and key_by.key == topic.key)


def _key_field(head: Stream[Any], pre: Sequence[Any]) -> str:
    """What the key is called in result records: the field it was taken from."""
    keys = [s for s in pre if isinstance(s, KeyBy)]
    if keys:
        return keys[-1].field_name or "key"
    return head.topic.key_field or "key"


def _stage_watermark(
    b: Builder, name: str, head: Stream[Any], source: Source, *, needed: bool
) -> Any:
    if source.topic == b.internal(name, "repartition"):
        # Records arrive from every upstream task: the clock is the minimum of the
        # watermarks they send along (Flink's rule across a shuffle).
        idle = b.settings.upstream_idle_timeout_ms or None
        return FromUpstream(idle_timeout_ms=idle)
    if head.watermark is None and needed:
        return _require_watermark(name, head)
    return head.watermark


def _require_watermark(name: str, head: Stream[Any]) -> WatermarkStrategy:
    if head.watermark is None:
        raise PlanError(
            f"agent {name}: event time needs a watermark: app.stream({head.topic.name!r}, "
            "watermark=BoundedOutOfOrderness(bound_ms=...))"
        )
    return head.watermark


def _join_watermark(
    name: str, left: Stream[Any], right: Stream[Any], left_topic: str, right_topic: str
) -> WatermarkStrategy:
    lw, rw = _require_watermark(name, left), _require_watermark(name, right)
    every = [w.emit_every_ms for w in (lw, rw) if w.emit_every_ms is not None]
    # Each side keeps its own idleness; emission is per record unless a side asks
    # for periodic, then at the shorter period.
    return PerInput({left_topic: lw, right_topic: rw}, emit_every_ms=min(every, default=None))


# -- types and steps --------------------------------------------------------------------


def _type_after(value_type: Any, steps: Iterable[Stateless]) -> Any:
    for step in steps:
        if step.kind != "filter":
            value_type = step.out_type
    return value_type


def _element_type(head: Stream[Any], pre: Sequence[Any]) -> Any:
    return _type_after(head.topic.value, (s for s in pre if isinstance(s, Stateless)))


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _serde_of(tp: Any) -> Serde[Any]:
    return JsonModel(tp) if _is_model(tp) else Json()


def _reviver(tp: Any) -> Callable[[Any], Any] | None:
    return tp.model_validate if _is_model(tp) else None


def _side_reviver(
    left: Callable[[Any], Any] | None, right: Callable[[Any], Any] | None
) -> Callable[[Any], Any] | None:
    if left is None and right is None:
        return None
    sides = (left, right)

    def revive(tagged: dict[str, Any]) -> dict[str, Any]:
        fn = sides[tagged["side"]]
        return tagged if fn is None else {"side": tagged["side"], "value": fn(tagged["value"])}

    return revive


def _compose(steps: Sequence[Stateless]) -> Callable[[Any], Iterable[Any]] | None:
    """The stateless steps as one function: a value -> the values it becomes."""
    if not steps:
        return None
    fns = [(s.kind, s.fn) for s in steps]

    def run(value: Any) -> list[Any]:
        values = [value]
        for kind, fn in fns:
            if kind == "filter":
                values = [v for v in values if fn(v)]
            elif kind == "map":
                values = [fn(v) for v in values]
            else:
                values = [out for v in values for out in fn(v)]
            if not values:
                break
        return values

    return run


def _result_values(target: Target) -> Target:
    """A window join emits its function's values, not window records."""
    inner = target.steps

    def values(result: Any) -> Iterable[Any]:
        return [result.value] if inner is None else inner(result.value)

    return Target(target.topic, target.encode, values)


class _FunctionAsProcess:
    """A plain ``fn(value, ctx)`` given to ``.process``."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.process_element = fn


def _as_process_function(function: Any) -> Any:
    if hasattr(function, "process_element") or hasattr(function, "process_element1"):
        return function
    if callable(function):
        return _FunctionAsProcess(function)
    raise PlanError(f"{function!r} is not a process function (process_element(value, ctx))")


def _schemas(
    states: Sequence[StateDescriptor[Any]], *, broadcast: bool = False
) -> dict[str, StateSchema] | None:
    if not states:
        return None
    schemas = {
        d.name: StateSchema(d.version) if not d.migrate else json_schema(d.version, d.migrate)
        for d in states
    }
    if broadcast:
        schemas["broadcast.*"] = StateSchema()
    return schemas


def _state_views(agent: str, states: Sequence[StateDescriptor[Any]]) -> list[View]:
    return [View(agent, agent, "state", descriptor=d) for d in states if d.queryable]


# -- @app.agent -----------------------------------------------------------------------------


def compile_agent(b: Builder, agent: AgentDef, settings: AgentSettings | None) -> Compiled:
    topic = agent.topic
    if not topic.keyed:
        raise PlanError(
            f"agent {agent.name}: @app.agent keeps keyed state, and topic {topic.name} "
            "declares no key: declare Topic(key=...), or write the agent with "
            "app.stream(...).key_by(...).process(...), which repartitions"
        )
    source = _source(b, topic, [], check_key=True)
    outputs = {t.name: (b.target(t),) for t in agent.outputs}
    stage = KeyedProcess(
        agent.name,
        (source,),
        agent_function(agent, settings),
        outputs,
        watermark=agent.watermark,
        states=_schemas(agent.states),
    )
    compiled = Compiled(
        agent.name,
        [stage],
        topics=[topic, *agent.outputs],
        settings=settings,
        group_id=agent.group_id,
    )
    compiled.views += _state_views(agent.name, agent.states)
    return compiled


__all__ = [
    "Builder",
    "Compiled",
    "PlanError",
    "View",
    "compile_agent",
    "compile_stream",
    "window_record",
]
