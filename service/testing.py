"""Testing an app without Kafka: the test driver (after Kafka Streams'
``TopologyTestDriver``, which runs the real ``StreamTask`` with a mock producer).

.. code-block:: python

    with TestDriver(app) as driver:
        driver.send(clicks, Click(user="ann", page="/", ts_ms=1_000))
        driver.send(clicks, Click(user="ann", page="/", ts_ms=70_000))
        assert [r.value["value"] for r in driver.read(click_counts)] == [1]
        assert driver.windows("clicks_per_minute", "ann")[0]["value"] == 1

The driver builds the app as a worker does and runs each stage's partition 0
through the worker's own :class:`~eddy.runtime.task.Task` and
:class:`~eddy.runtime.output.TaskOutput`, on Kafka in memory
(:mod:`eddy.runtime.memory`): the same decoding, dispatch, dead letters and
their headers, operators, RocksDB state (in a temporary directory), changelog
and transactions. Each call (``send``, ``advance_time``, ``watermark``...) is one
fetch of the worker's loop: every stage first learns the processing time, then
reads what is new on its inputs, and checkpoints (see ``checkpoint`` below). What
a stage commits to a topic another stage reads (a repartition topic, or an
agent's output that another agent reads) is fed to that stage, as a
``read_committed`` consumer would see it. Processing time only moves when the
test says so; event time moves with the records (and with :meth:`watermark`).

Where the driver differs from a worker, on purpose:

* an agent's code that raises fails the call with its exception (a worker
  retries the record and dead-letters it after ``EDDY_MAX_RECORD_ATTEMPTS``): in
  a test, a failing agent is a bug to see. The stage is rewound to its last
  checkpoint, as a worker's is, so the driver stays usable;
* an output that cannot be encoded is dead-lettered at once (a worker first
  replays from its last checkpoint carefully, then dead-letters the same output);
  state that cannot be encoded fails the call, naming the value;
* a re-keying stage sends its watermark downstream after each batch it reads (a
  worker sends it every ``marker_every_ms`` of processing time, which moves here
  only when told).

Every method that runs the agents has an ``a``-prefixed coroutine twin
(``asend``, ``asend_many``, ``aset_time``, ``aadvance_time``, ``awatermark``,
``aend_of_input``, ``aclose``) for tests that run in an event loop already (the
agents' awaits then run in it); such a test closes the driver with ``async with``
(or ``await driver.aclose()``). The reads have twins too (``aread``,
``adead_letters``, ``awindows``, ``ahas_data``, ``astate``) so a coroutine test
can await everything alike; they run no agent code. ``stores()`` and
``internal_topics`` have none: they hand out objects, nothing runs.

Closing the driver stops the agents as a worker's stop does: lookups in flight
are dropped, then every close hook runs (``enrich(..., on_close=...)``: an HTTP
session, a connection pool), in the event loop that used the resources, also
when a test or a replay failed midway.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Awaitable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from aiokafka import AIOKafkaProducer, TopicPartition

from eddy.app.app import App, BuiltApp
from eddy.app.reads import has_windows, state_value, window_rows
from eddy.app.topic import Topic
from eddy.eventtime.descriptors import StateDescriptor
from eddy.eventtime.keyed import MAX_WATERMARK
from eddy.metrics import Metrics
from eddy.pipeline.base import BroadcastLogic, ClosingPipeline, Headers, Pipeline
from eddy.pipeline.markers import WATERMARK
from eddy.pipeline.source import as_key
from eddy.runtime.memory import MemoryBroker, MemoryProducer, MemoryRecord
from eddy.runtime.output import TaskOutput
from eddy.runtime.restarts import RecordFailedError, ReplayCarefully, RestartPolicy
from eddy.runtime.task import ExternalIOError, Task
from eddy.schemas.base import SchemaSerde
from eddy.schemas.binder import SchemaBinder
from eddy.schemas.memory import MemoryRegistry
from eddy.serde import DecodeError, Json, Serde
from eddy.settings import Settings, build
from eddy.tables.store import ENCODE_ERRORS, PartitionStore
from eddy.topics import changelog_topic

T = TypeVar("T")
REASON = "eddy.reason"
# Window starts are signed 64-bit milliseconds: by default windows() reads them all.
ALL_TIME_FROM_MS = -(2**63)
ALL_TIME_TO_MS = 2**63 - 1
# What a function reads from an absent state, by the state's kind (ValueState: None).
_EMPTY: dict[str, Any] = {"list": list, "map": dict}
Checkpoint = int | Literal["batch", "input"]
log = logging.getLogger(__name__)


@dataclass(slots=True)
class Sent:
    """A record a stage committed: to an output topic, a repartition topic or the
    dead-letter topic (``reason`` set). ``timestamp_ms`` is None where the stage
    gave none (a broker stamps it with the producer's clock)."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int | None

    @property
    def reason(self) -> str | None:
        found = dict(self.headers).get(REASON)
        return None if found is None else found.decode()

    @property
    def is_marker(self) -> bool:
        return not self.value and any(name == WATERMARK for name, _ in self.headers)


@dataclass(frozen=True, slots=True)
class Output:
    """A record on an output topic, decoded with the topic's serde; ``headers`` as
    sent (the late output's ``eddy.watermark_ms``, say)."""

    key: str | None
    value: Any
    timestamp_ms: int | None
    headers: tuple[tuple[str, bytes], ...] = ()


class _Stage:
    """One stage: its store, and the worker's task of its partition 0."""

    def __init__(self, pipeline: Pipeline, store: PartitionStore, producer: MemoryProducer) -> None:
        self.pipeline = pipeline
        self.name = pipeline.name
        self.store = store
        self.producer = producer
        self.broadcast: str | None = getattr(pipeline, "broadcast_topic", None)
        self.broadcast_read = 0  # the next offset of the broadcast topic to read
        self.task: Task  # set by the driver (_open)

    @property
    def inputs(self) -> list[str]:
        return [*self.pipeline.sources, *([self.broadcast] if self.broadcast else [])]


def _read_key(serde: Serde[Any] | None, raw: bytes | None) -> str | None:
    if raw is None:
        return None
    if serde is None:
        return raw.decode("utf-8", "replace")
    try:
        return as_key(serde.decode(raw))
    except DecodeError:
        return raw.decode("utf-8", "replace")


def _key_of(topic: Topic[Any], value: Any) -> str | None:
    """The key a producer would give ``value`` on ``topic`` (None if it has none)."""
    assert topic.key_of is not None
    try:
        decoded = topic.codec.decode(value) if isinstance(value, bytes) else value
        key = topic.key_of(decoded)
    except (DecodeError, KeyError, AttributeError, TypeError):
        return None  # not a value of the topic: the app dead-letters it
    return key if isinstance(key, str) else None


def _batch_size(checkpoint: Checkpoint) -> int | None:
    """Records per checkpoint (None: all a call brought), or ValueError."""
    if checkpoint == "batch":
        return None
    if checkpoint == "input":
        return 1
    if isinstance(checkpoint, int) and not isinstance(checkpoint, bool) and checkpoint >= 1:
        return checkpoint
    raise ValueError(
        f'checkpoint must be "batch", "input" or a number of inputs >= 1, not {checkpoint!r}'
    )


class TestDriver:
    """Runs an app in memory on the worker's own task code. See the module docstring.

    Args:
        app: the app (``eddy.examples.app``, or the one under test).
        agents: which agents to run (default: the app's default agents).
        settings: framework settings (field names, e.g. ``{"exactly_once": ...}``);
            the topic prefix is empty unless given. Topics have one partition.
        agent_settings: per settings class name, its field values.
        start_ms: the processing time at start.
        checkpoint: when a stage checkpoints. ``"batch"`` (the default) is what a
            worker does with one fetch: it reads everything new on its inputs (one
            record per ``send``, the whole list of ``send_many``) and checkpoints
            once at the end, and in between whenever a watermark closed more
            windows than one checkpoint fires (``EDDY_FIRINGS_PER_CHECKPOINT``). A
            worker also checkpoints every ``EDDY_COMMIT_INTERVAL_MS`` of wall-clock
            time within a fetch; the driver has no wall clock, so a call is one
            interval. ``"input"`` checkpoints after every input record; a number N
            after every N. Results do not depend on it, except where a worker's
            would too: what a re-keying stage tells the next of its watermark, and
            when outputs become visible downstream, go with checkpoints.
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        app: App,
        *,
        agents: Iterable[str] | None = None,
        settings: Mapping[str, Any] | None = None,
        agent_settings: Mapping[str, Mapping[str, Any]] | None = None,
        start_ms: int = 0,
        checkpoint: Checkpoint = "batch",
    ) -> None:
        self._batch = _batch_size(checkpoint)
        self.settings: Settings = build(Settings, {"topic_prefix": "", **(settings or {})})
        # Schema-registry topics run through their real serdes, on a registry in memory.
        self._schemas = SchemaBinder(registry=MemoryRegistry())
        self._bound: dict[str, Serde[Any]] = {}
        self.built: BuiltApp = app.build(self.settings, agents, agent_settings, self._schemas)
        self.now_ms = start_ms
        self.sent: list[Sent] = []
        self._broker = MemoryBroker(lambda: self.now_ms)
        self._broker.on_visible = self._record_sent
        self._metrics = Metrics()
        self._restarts = RestartPolicy.from_settings(self.settings)
        self._dir = Path(tempfile.mkdtemp(prefix="eddy-driver-"))
        self._stages = [self._stage(p) for p in self.built.stages]
        self._changelogs = {changelog_topic(self.settings, s.name) for s in self._stages}
        self._topics = {
            self.settings.topic(t.name): t for a in self.built.agents.values() for t in a.topics
        }
        self._readers: dict[str, list[_Stage]] = {}
        for stage in self._stages:
            for topic in stage.inputs:
                self._readers.setdefault(topic, []).append(stage)
        self._broker.kept = set(self._readers)  # what no stage reads is not stored
        self._loop: asyncio.AbstractEventLoop | None = None
        # The caller's loop, when the a-prefixed twins ran the agents in it.
        self._outer_loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    def _stage(self, pipeline: Pipeline) -> _Stage:
        store = PartitionStore(self._dir / pipeline.name)
        producer = MemoryProducer(self._broker, transactional=self.settings.exactly_once)
        stage = _Stage(pipeline, store, producer)
        offsets = {TopicPartition(topic, 0): 0 for topic in pipeline.sources}
        self._open(stage, offsets)
        return stage

    def _open(self, stage: _Stage, offsets: dict[TopicPartition, int]) -> None:
        """A task over the stage's committed store, from ``offsets`` (a worker's
        ``Partitions._start``)."""
        output = TaskOutput(
            stage.name, self.settings.dead_letters, self._metrics, defaultdict(lambda: 1)
        )
        stage.task = Task(
            pipeline=stage.pipeline,
            partition=0,
            store=stage.store,
            # The in-memory producer has the part of AIOKafkaProducer a task uses.
            producer=cast(AIOKafkaProducer, stage.producer),
            exactly_once=self.settings.exactly_once,
            changelog_topic=changelog_topic(self.settings, stage.name),
            output=output,
            offsets=offsets,
            restarts=self._restarts,
        )
        # Dead-letter an unwritable output at once: where a worker's careful replay
        # ends (see the module docstring).
        output.careful = True
        if stage.broadcast is not None:  # re-read what its state has not applied
            applied = cast(BroadcastLogic, stage.task.logic).broadcast_offsets
            stage.broadcast_read = applied.get(0, 0)

    def _record_sent(self, records: list[MemoryRecord]) -> None:
        """What a stage committed, as a read_committed reader sees it."""
        self.sent += [
            Sent(r.topic, r.key, r.value, r.headers, None if r.stamped else r.timestamp)
            for r in records
            if r.topic not in self._changelogs
        ]

    # -- context manager ------------------------------------------------------------------

    def __enter__(self) -> TestDriver:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    async def __aenter__(self) -> TestDriver:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    def close(self) -> None:
        """Stop the agents as a worker stops (see the module docstring), then remove
        the state. Closing twice does nothing.

        Raises:
            RuntimeError: the driver ran in the caller's event loop (the ``a``-prefixed
                twins) and has agents with close hooks: those must run in that loop,
                with ``await driver.aclose()`` or ``async with``. The state is
                removed all the same.
        """
        if self._closed:
            return
        try:
            if not self._closing():
                self._cancel_in_flight()
            elif self._outer_loop is not None:
                self._cancel_in_flight()
                raise RuntimeError(
                    "the test driver ran in an event loop of its caller and its agents "
                    "hold resources to close there: use `async with TestDriver(...)` or "
                    "`await driver.aclose()`"
                )
            else:
                self._run(self._close_agents())
        finally:
            self._release()

    async def aclose(self) -> None:
        """:meth:`close` in the running event loop (the one the ``a``-prefixed twins
        ran the agents in)."""
        if self._closed:
            return
        try:
            await self._close_agents()
        finally:
            self._release()

    def _closing(self) -> list[ClosingPipeline]:
        return [s.pipeline for s in self._stages if isinstance(s.pipeline, ClosingPipeline)]

    async def _close_agents(self) -> None:
        """What a worker's stop does before its state closes: discard the work in
        flight (nothing after the last checkpoint is kept), then run each stage's
        close hook once; one that fails is logged and the others still run."""
        self._cancel_in_flight()
        for pipeline in self._closing():
            try:
                await pipeline.close()
            except Exception:  # closing anyway, as the worker does: say so, close the rest
                log.exception("%s: closing the pipeline's resources failed", pipeline.name)

    def _cancel_in_flight(self) -> None:
        for stage in self._stages:
            stage.task.discard()

    def _release(self) -> None:
        self._closed = True
        for stage in self._stages:
            stage.store.close()
        if self._loop is not None:
            _shut_down(self._loop)
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- input ----------------------------------------------------------------------------

    def send(
        self,
        topic: Topic[Any] | str,
        value: Any,
        *,
        key: str | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        """Produce ``value`` to ``topic`` and let every stage reading it process it
        (one fetch).

        Args:
            value: a value of the topic's type, or ``bytes`` sent as they are (to
                see what the app does with a bad record).
            key: the Kafka key; default: the value's key, as the topic declares it.
            timestamp_ms: the Kafka timestamp; default: the processing time.

        Raises:
            ValueError: no agent of the app reads ``topic``.
        """
        self._run(self.asend(topic, value, key=key, timestamp_ms=timestamp_ms))

    async def asend(
        self,
        topic: Topic[Any] | str,
        value: Any,
        *,
        key: str | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        """:meth:`send` in the running event loop."""
        self._check_open()
        self._produce(topic, value, key, timestamp_ms)
        await self._fetch()

    def send_many(
        self, topic: Topic[Any] | str, values: Iterable[Any], *, timestamp_ms: int | None = None
    ) -> None:
        """Produce every value (each keyed as its topic declares) and let the stages
        read them as one fetch: with ``checkpoint="batch"`` one checkpoint for all.

        Args:
            timestamp_ms: every record's Kafka timestamp; default: the processing time.
        """
        self._run(self.asend_many(topic, values, timestamp_ms=timestamp_ms))

    async def asend_many(
        self, topic: Topic[Any] | str, values: Iterable[Any], *, timestamp_ms: int | None = None
    ) -> None:
        """:meth:`send_many` in the running event loop."""
        self._check_open()
        for value in values:
            self._produce(topic, value, None, timestamp_ms)
        await self._fetch()

    def set_time(self, now_ms: int) -> None:
        """Set processing time (it never goes back: an earlier time is ignored)."""
        self._run(self.aset_time(now_ms))

    async def aset_time(self, now_ms: int) -> None:
        """:meth:`set_time` in the running event loop."""
        await self.aadvance_time(max(0, now_ms - self.now_ms))

    def advance_time(self, ms: int) -> None:
        """Move processing time forward by ``ms``: processing-time timers, periodic
        and idle watermarks.

        Raises:
            ValueError: ``ms`` is negative.
        """
        self._run(self.aadvance_time(ms))

    async def aadvance_time(self, ms: int) -> None:
        """:meth:`advance_time` in the running event loop."""
        if ms < 0:
            raise ValueError("processing time does not go back")
        self.now_ms += ms
        await self._fetch()

    def watermark(self, watermark_ms: int) -> None:
        """An explicit watermark for every stage, as if every input had reached
        ``watermark_ms``: windows ending at or before it close, event-time timers up
        to it fire. Stages take it in order, so a re-keying stage passes it on."""
        self._run(self.awatermark(watermark_ms))

    async def awatermark(self, watermark_ms: int) -> None:
        """:meth:`watermark` in the running event loop."""
        await self._fetch()
        for stage in self._stages:
            await self._guarded(stage, stage.task.advance_watermark(watermark_ms))
            await self._checkpoint(stage)
            await self._drain()

    def end_of_input(self) -> None:
        """The watermark goes to +infinity (``MAX_WATERMARK``): every window closes,
        every event-time timer fires, what a bounded input does in Flink (and
        ``eddy replay`` at the end of its input). Queryable results stay: they
        expire by the driver's processing time (:meth:`advance_time`), as a worker's
        expire by its clock, never by the watermark."""
        self.watermark(MAX_WATERMARK)

    async def aend_of_input(self) -> None:
        """:meth:`end_of_input` in the running event loop."""
        await self.awatermark(MAX_WATERMARK)

    # -- output and state -------------------------------------------------------------------

    def read(self, topic: Topic[Any] | str) -> list[Output]:
        """What was committed to ``topic`` so far (watermark markers left out), decoded
        by its serde (JSON if it is named by a string), with headers."""
        name = self._name(topic)
        serde = self._value_serde(topic)
        key_serde = self._key_serde(topic) if isinstance(topic, Topic) else None
        found = []
        for sent in self.sent:
            if sent.topic != name or sent.is_marker:
                continue
            try:
                value = serde.decode(sent.value)
            except DecodeError:
                value = sent.value
            key = _read_key(key_serde, sent.key)
            found.append(Output(key, value, sent.timestamp_ms, tuple(sent.headers)))
        return found

    async def aread(self, topic: Topic[Any] | str) -> list[Output]:
        """:meth:`read`, to await."""
        return self.read(topic)

    @property
    def internal_topics(self) -> list[str]:
        """Topics Eddy made for the app (repartition topics)."""
        return [i.name for a in self.built.agents.values() for i in a.internal]

    def dead_letters(self) -> list[Sent]:
        """Records committed to the dead-letter topic, with a worker's headers;
        ``.reason`` says why."""
        return [s for s in self.sent if s.topic == self.settings.dead_letters]

    async def adead_letters(self) -> list[Sent]:
        """:meth:`dead_letters`, to await."""
        return self.dead_letters()

    def windows(
        self,
        agent: str,
        key: str,
        from_ms: int = ALL_TIME_FROM_MS,
        to_ms: int = ALL_TIME_TO_MS,
        limit: int = 10_000,
    ) -> list[dict[str, Any]]:
        """``key``'s queryable window results of ``agent`` whose window starts in
        ``[from_ms, to_ms)`` (default: all time, before the epoch too), oldest
        first, as REST serves them.

        Raises:
            KeyError: no agent of that name runs in the driver.
        """
        store = self._store_of(agent)
        return [row for _, row in window_rows(store, key, from_ms, to_ms, limit)]

    async def awindows(
        self,
        agent: str,
        key: str,
        from_ms: int = ALL_TIME_FROM_MS,
        to_ms: int = ALL_TIME_TO_MS,
        limit: int = 10_000,
    ) -> list[dict[str, Any]]:
        """:meth:`windows`, to await."""
        return self.windows(agent, key, from_ms, to_ms, limit)

    def has_data(self, agent: str, key: str) -> bool:
        """Whether ``key`` has a result or a window still open in ``agent``."""
        return has_windows(self._store_of(agent), key)

    async def ahas_data(self, agent: str, key: str) -> bool:
        """:meth:`has_data`, to await."""
        return self.has_data(agent, key)

    def stores(self) -> dict[str, PartitionStore]:
        """Each stage's committed state (partition 0), by stage name: to snapshot
        it, or to read a table no view serves."""
        return {stage.name: stage.store for stage in self._stages}

    def state(self, agent: str, descriptor: StateDescriptor[T], key: str) -> Any:
        """``key``'s committed value of ``descriptor`` in ``agent``, as the agent's
        function reads it: ``[]`` for an empty ``ListState``, ``{}`` for an empty
        ``MapState``, None for an absent ``ValueState``."""
        value = state_value(self._store_of(agent), descriptor, key)
        empty = _EMPTY.get(descriptor.kind)
        return empty() if value is None and empty is not None else value

    async def astate(self, agent: str, descriptor: StateDescriptor[T], key: str) -> Any:
        """:meth:`state`, to await."""
        return self.state(agent, descriptor, key)

    # -- the worker's loop, one fetch at a time -------------------------------------------

    def _produce(
        self, topic: Topic[Any] | str, value: Any, key: str | None, timestamp_ms: int | None
    ) -> None:
        name = self._name(topic)
        if name not in self._readers:
            known = ", ".join(sorted(self._readers))
            raise ValueError(f"no agent of the app reads topic {name!r} (read: {known})")
        declared = topic if isinstance(topic, Topic) else self._topics.get(name)
        raw = value if isinstance(value, bytes) else self._encode(declared or name, value)
        if key is None and declared is not None and declared.key_of is not None:
            key = _key_of(declared, value)
        stamp = self.now_ms if timestamp_ms is None else timestamp_ms
        self._broker.append(name, raw, key=self._key_bytes(declared, key), timestamp_ms=stamp)

    async def _fetch(self) -> None:
        """One pass of a worker's loop (``PipelineRuntime._handle``): processing time
        first, then what its watermark fired, then the inputs; until every stage has
        read everything committed and checkpointed."""
        self._check_open()
        for stage in self._stages:
            await self._guarded(stage, stage.task.tick(self.now_ms))
            await self._fire_due(stage, None)
        await self._drain()

    async def _drain(self) -> None:
        """Stages read what is new until none has anything left; the stage furthest
        downstream goes first, so a record's consequences settle before the next."""
        while True:
            stage = next((s for s in reversed(self._stages) if self._unread(s)), None)
            if stage is not None:
                await self._read_inputs(stage)
                continue
            busy = [s for s in self._stages if s.task.has_work]
            if not busy:
                return
            for stage in busy:
                await self._checkpoint(stage)

    def _unread(self, stage: _Stage) -> bool:
        if stage.broadcast and self._broker.read(stage.broadcast, 0, stage.broadcast_read):
            return True
        return any(self._broker.read(*tp, offset) for tp, offset in self._positions(stage))

    def _positions(self, stage: _Stage) -> list[tuple[tuple[str, int], int]]:
        next_offsets = stage.task.next_offsets
        return [((tp.topic, tp.partition), next_offsets.get(tp, 0)) for tp in next_offsets]

    async def _read_inputs(self, stage: _Stage) -> None:
        """One batch of the stage's inputs (``checkpoint`` records of each), then a
        checkpoint."""
        if stage.broadcast:
            control = self._broker.read(stage.broadcast, 0, stage.broadcast_read)
            if control:
                stage.broadcast_read = control[-1].offset + 1
                await self._guarded(stage, stage.task.process_broadcast(control))
        for (topic, partition), offset in self._positions(stage):
            records = self._broker.read(topic, partition, offset)[: self._batch]
            tp = TopicPartition(topic, partition)
            while records:
                task = stage.task
                if await self._guarded(stage, task.process(tp, records)) is None:
                    break  # rewound: the pass starts again from the committed offsets
                await self._fire_due(stage, tp)
                records = [r for r in records if r.offset >= task.next_offsets[tp]]
        send_watermark = getattr(stage.task.logic, "send_watermark", None)
        if send_watermark is not None:
            send_watermark(stage.task.output)
            await self._guarded(stage, stage.task.send_emitted())
        await self._checkpoint(stage)

    async def _fire_due(self, stage: _Stage, tp: TopicPartition | None) -> None:
        """A watermark closed more windows than one checkpoint fires: fire them a
        checkpoint's worth at a time, checkpointing in between, as a worker does."""
        while stage.task.firing_due:
            await self._checkpoint(stage)
            if await self._guarded(stage, stage.task.fire_due(tp)) is None:
                return
            await self._checkpoint(stage)

    async def _checkpoint(self, stage: _Stage) -> None:
        """A worker's checkpoint of one task (``Checkpointer._commit_one``): outputs,
        changelog and offsets in one transaction, then the local write."""
        if stage.task.has_work:
            await self._guarded(stage, self._commit(stage.task, stage.name))

    async def _commit(self, task: Task, stage: str) -> None:
        await task.prepare_commit()
        if self.settings.exactly_once:
            await task.commit_transaction(self.built.group_id_of(stage))
        task.finish_commit()
        for tp, offset in task.committed_offsets.items():
            if len(self._readers[tp.topic]) == 1:  # this stage is its only reader
                self._broker.trim(tp.topic, tp.partition, offset)

    async def _guarded(self, stage: _Stage, work: Awaitable[T]) -> T | None:
        """``work``'s result; None if the task was rewound to its last checkpoint for
        a record whose state change cannot be written (it is dead-lettered when read
        again, as in a worker).

        Raises:
            Exception: what the agent's code raised, or a lookup's error at the
                checkpoint, or the encoding error of unwritable state: the stage is
                rewound to its last checkpoint first.
        """
        try:
            return await work
        except RecordFailedError as failure:
            await self._rewind(stage)
            if failure.deterministic:
                self._restarts.on_failure(failure)  # poison: dead-lettered when read again
                return None
            raise failure.cause from None
        except ExternalIOError as failure:
            await self._rewind(stage)
            raise (failure.__cause__ or failure) from None
        except ReplayCarefully as failure:
            await self._rewind(stage)
            # The task raised it "from None"; the encoding error names the value.
            cause = failure.__context__
            if isinstance(cause, ENCODE_ERRORS):
                raise cause from None
            raise

    async def _rewind(self, stage: _Stage) -> None:
        """Start the stage again from its last checkpoint (``Partitions.rewind``)."""
        task = stage.task
        await task.abort()
        task.discard()
        self._open(stage, dict(task.committed_offsets))

    # -- internals --------------------------------------------------------------------------

    def _name(self, topic: Topic[Any] | str) -> str:
        return self.settings.topic(topic.name) if isinstance(topic, Topic) else topic

    def _encode(self, topic: Topic[Any] | str, value: Any) -> bytes:
        return self._value_serde(topic).encode(value)

    def _value_serde(self, topic: Topic[Any] | str) -> Serde[Any]:
        if not isinstance(topic, Topic):
            return Json()
        if isinstance(topic.serde, SchemaSerde):
            return self._bind(topic, "value", topic.serde, topic.value)
        return topic.codec

    def _key_serde(self, topic: Topic[Any]) -> Serde[Any] | None:
        if isinstance(topic.key_serde, SchemaSerde):
            return self._bind(topic, "key", topic.key_serde, None)
        return topic.key_serde

    def _key_bytes(self, topic: Topic[Any] | None, key: str | None) -> bytes | None:
        serde = None if topic is None or key is None else self._key_serde(topic)
        if serde is not None:
            return serde.encode(key)
        return None if key is None else key.encode()

    def _bind(self, topic: Topic[Any], role: str, serde: SchemaSerde, model: Any) -> Serde[Any]:
        """The topic's serde as the app's stages bound it (same subject, same registry)."""
        subject = f"{self._name(topic)}-{role}"
        if subject not in self._bound:
            self._bound[subject] = self._schemas.bind(serde, subject, model)
        return self._bound[subject]

    def _store_of(self, agent: str) -> PartitionStore:
        for stage in self._stages:
            if stage.name == agent:
                return stage.store
        raise KeyError(f"no agent {agent!r} runs in this driver")

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the test driver is closed")
        running = asyncio.get_running_loop()
        if running is not self._loop:
            self._outer_loop = running

    def _run(self, step: Coroutine[Any, Any, T]) -> T:
        if _in_event_loop():
            step.close()  # never to run: no "coroutine was never awaited" warning
            raise RuntimeError(
                "the test driver's blocking methods cannot run inside an event loop: "
                "await its a-prefixed twins (asend, aadvance_time, awatermark...)"
            )
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(step)


def _shut_down(loop: asyncio.AbstractEventLoop) -> None:
    """Close the driver's own loop as ``asyncio.run`` closes its loop: what is still
    pending (a cancelled lookup) finishes cancelling first, so nothing is reported
    destroyed while pending. Inside another running loop (``aclose`` of a driver that
    also ran through its blocking methods) the loop can only be closed."""
    try:
        if _in_event_loop():
            return
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
