"""Testing an app without Kafka: the test driver (after Kafka Streams'
``TopologyTestDriver``).

.. code-block:: python

    with TestDriver(app) as driver:
        driver.send(clicks, Click(user="ann", page="/", ts_ms=1_000))
        driver.send(clicks, Click(user="ann", page="/", ts_ms=70_000))
        assert [r.value["value"] for r in driver.read(click_counts)] == [1]
        assert driver.windows("clicks_per_minute", "ann")[0]["value"] == 1

The driver builds the app as a worker does and runs every stage of it as one
partition would: the same decoding and dead-lettering, the same operators and
RocksDB state (in a temporary directory), a checkpoint after every input. What
a stage sends to a topic another stage reads (a repartition topic, or an
agent's output that another agent reads) is fed to that stage. Processing time
only moves when the test says so; event time moves with the records (and with
:meth:`TestDriver.watermark`), as in a worker.

Every method has an ``a``-prefixed coroutine twin (``asend``...) for tests
that run in an event loop already (the agents' awaits run in it); such a test
closes the driver with ``async with`` (or ``await driver.aclose()``).

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
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from eddy.app.app import App, BuiltApp
from eddy.app.reads import has_windows, state_value, window_rows
from eddy.app.topic import Topic
from eddy.eventtime.descriptors import StateDescriptor
from eddy.eventtime.keyed import MAX_WATERMARK
from eddy.pipeline.base import (
    AsyncLogic,
    BoundedFiring,
    ClosingPipeline,
    Headers,
    PartitionLogic,
    Pipeline,
)
from eddy.pipeline.markers import WATERMARK
from eddy.pipeline.source import as_key
from eddy.schemas.base import SchemaSerde
from eddy.schemas.binder import SchemaBinder
from eddy.schemas.memory import MemoryRegistry
from eddy.serde import DecodeError, Json, Serde
from eddy.settings import Settings, build
from eddy.tables.store import PartitionStore, PartitionTransaction

T = TypeVar("T")
REASON = "eddy.reason"
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DriverRecord:
    """A record as the driver hands it to a stage (a consumed Kafka record)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(slots=True)
class Sent:
    """A record a stage sent: to an output topic, a repartition topic or the
    dead-letter topic (``reason`` set)."""

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
    """A record on an output topic, decoded with the topic's serde."""

    key: str | None
    value: Any
    timestamp_ms: int | None


@dataclass
class _Collector:
    """The :class:`~eddy.pipeline.base.Output` of one stage in the driver: one
    partition. The stages share ``sent``, the records not forwarded yet."""

    dead_letter_topic: str
    pipeline: str
    sent: list[Sent] = field(default_factory=list)

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Headers = (),
        timestamp_ms: int | None = None,
        partition: int | None = None,
    ) -> None:
        self.sent.append(Sent(topic, key, value, tuple(headers), timestamp_ms))

    def partitions_of(self, topic: str) -> int:
        return 1

    def dead_letter(self, record: Any, reason: str) -> None:
        # The headers a worker's dead letter carries (service/runtime/output.py).
        headers = (
            (REASON, reason.encode()),
            ("eddy.pipeline", self.pipeline.encode()),
            ("eddy.source.topic", record.topic.encode()),
            ("eddy.source.partition", str(record.partition).encode()),
            ("eddy.source.offset", str(record.offset).encode()),
        )
        self.sent.append(Sent(self.dead_letter_topic, record.key, record.value, headers, None))

    def dead_letter_output(
        self,
        topic: str | None,
        key: str | None,
        value: Any,
        reason: str,
        window: tuple[int, int] | None = None,
    ) -> None:
        # A worker's headers (service/runtime/output.py); its value is the repr.
        headers = [(REASON, reason.encode()), ("eddy.pipeline", self.pipeline.encode())]
        headers += [] if topic is None else [("eddy.output.topic", topic.encode())]
        raw_key = None if key is None else key.encode(errors="backslashreplace")
        headers += [] if raw_key is None else [("eddy.key", raw_key)]
        if window is not None:
            headers.append(("eddy.window_start_ms", str(window[0]).encode()))
            headers.append(("eddy.window_end_ms", str(window[1]).encode()))
        body = repr(value).encode(errors="backslashreplace")
        self.sent.append(Sent(self.dead_letter_topic, raw_key, body, tuple(headers), None))

    def count(self, event: str, n: int = 1) -> None:
        pass  # metrics are the worker's business

    def observe(self, event: str, seconds: float) -> None:
        pass


class _Stage:
    """One stage with its store, as partition 0 of a worker would run it."""

    def __init__(self, pipeline: Pipeline, directory: Path, out: _Collector) -> None:
        self.pipeline = pipeline
        self.out = out
        self.store = PartitionStore(directory / pipeline.name)
        self.txn: PartitionTransaction = self.store.begin()
        self.logic: PartitionLogic = pipeline.create_logic(0, self.store, self.txn)
        self.is_async = hasattr(self.logic, "flush")
        self.offsets: dict[str, int] = {}
        self.broadcast = getattr(pipeline, "broadcast_topic", None)

    @property
    def inputs(self) -> list[str]:
        return [*self.pipeline.sources, *([self.broadcast] if self.broadcast else [])]

    async def record(self, topic: str, sent: Sent, out: _Collector) -> None:
        offset = self.offsets.get(topic, 0)
        self.offsets[topic] = offset + 1
        record = DriverRecord(
            topic, 0, offset, sent.timestamp_ms or 0, sent.key, sent.value, tuple(sent.headers)
        )
        if topic == self.broadcast:
            self.logic.process_broadcast(record, out)  # type: ignore[attr-defined]
        elif self.is_async:
            await self._async.process_async(record, out)
        else:
            self.logic.process(record, out)
        self._fire_due(out)
        send_watermark = getattr(self.logic, "send_watermark", None)
        if send_watermark is not None:
            # A re-keying stage's clock goes downstream after every record, not on
            # a processing-time schedule: the driver's clock moves only when told.
            send_watermark(out)

    def cancel(self) -> None:
        """Drop the lookups (writes...) in flight: the stage is being discarded."""
        self._async.cancel()

    @property
    def _async(self) -> AsyncLogic:
        logic: AsyncLogic = self.logic  # type: ignore[assignment]
        return logic

    async def tick(self, now_ms: int, out: _Collector) -> None:
        if self.is_async:
            await self._async.tick_async(now_ms, out)
        else:
            self.logic.on_tick(now_ms, out)
        self._fire_due(out)

    def _fire_due(self, out: _Collector) -> None:
        """What a watermark left to fire past the windows one checkpoint holds: the
        worker checkpoints between the parts, the results are the same."""
        firing = self.logic
        if isinstance(firing, BoundedFiring):
            while firing.firing_due:
                firing.fire_due(out)

    async def watermark(self, watermark_ms: int, out: _Collector) -> None:
        if self.is_async:
            await self._async.advance_watermark_async(watermark_ms, out)
        else:
            self.logic.advance_watermark(watermark_ms, out)

    async def checkpoint(self, out: _Collector) -> None:
        if self.is_async:
            await self._async.flush(out)
        self.logic.prepare_commit()
        self.txn.commit(self.txn.changelog_records(), None)


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


class TestDriver:
    """Runs an app in memory. See the module docstring.

    Args:
        app: the app (``eddy.examples.app``, or the one under test).
        agents: which agents to run (default: the app's default agents).
        settings: framework settings (field names, e.g. ``{"partitions": 1}``);
            the topic prefix is empty unless given.
        agent_settings: per settings class name, its field values.
        start_ms: the processing time at start.
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
    ) -> None:
        self.settings: Settings = build(Settings, {"topic_prefix": "", **(settings or {})})
        # Schema-registry topics run through their real serdes, on a registry in memory.
        self._schemas = SchemaBinder(registry=MemoryRegistry())
        self._bound: dict[str, Serde[Any]] = {}
        self.built: BuiltApp = app.build(self.settings, agents, agent_settings, self._schemas)
        self._dir = Path(tempfile.mkdtemp(prefix="eddy-driver-"))
        self._pending: list[Sent] = []  # sent by a stage, not forwarded yet
        self._stages = [
            _Stage(p, self._dir, _Collector(self.settings.dead_letters, p.name, self._pending))
            for p in self.built.stages
        ]
        self._topics = {
            self.settings.topic(t.name): t for a in self.built.agents.values() for t in a.topics
        }
        self._readers: dict[str, list[_Stage]] = {}
        for stage in self._stages:
            for topic in stage.inputs:
                self._readers.setdefault(topic, []).append(stage)
        self.now_ms = start_ms
        self.sent: list[Sent] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        # The caller's loop, when the a-prefixed twins ran the agents in it.
        self._outer_loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._closed = False

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
        the state.

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
            if stage.is_async:
                stage.cancel()

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
        """Produce ``value`` to ``topic`` and let every stage reading it process it.

        Args:
            value: a value of the topic's type, or ``bytes`` sent as they are (to
                see what the app does with a bad record).
            key: the Kafka key; default: the value's key, as the topic declares it.
            timestamp_ms: the Kafka timestamp; default: the processing time.
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
        await self._start()
        name = self._name(topic)
        declared = topic if isinstance(topic, Topic) else self._topics.get(name)
        raw = value if isinstance(value, bytes) else self._encode(declared or name, value)
        if key is None and declared is not None and declared.key_of is not None:
            key = _key_of(declared, value)
        stamp = self.now_ms if timestamp_ms is None else timestamp_ms
        sent = Sent(name, self._key_bytes(declared, key), raw, (), stamp)
        if name not in self._readers:
            known = ", ".join(sorted(self._readers))
            raise ValueError(f"no agent of the app reads topic {name!r} (read: {known})")
        await self._deliver([sent])

    def set_time(self, now_ms: int) -> None:
        """Set processing time (it never goes back)."""
        self._run(self.aset_time(now_ms))

    async def aset_time(self, now_ms: int) -> None:
        await self.aadvance_time(max(0, now_ms - self.now_ms))

    def advance_time(self, ms: int) -> None:
        """Move processing time forward by ``ms``: processing-time timers,
        periodic and idle watermarks."""
        self._run(self.aadvance_time(ms))

    async def aadvance_time(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("processing time does not go back")
        await self._start()
        self.now_ms += ms
        await self._tick_all()

    def watermark(self, watermark_ms: int) -> None:
        """An explicit watermark for every stage (as if every input had reached it)."""
        self._run(self.awatermark(watermark_ms))

    async def awatermark(self, watermark_ms: int) -> None:
        await self._start()
        for stage in self._stages:
            await stage.watermark(watermark_ms, stage.out)
            await self._settle(stage)

    def end_of_input(self) -> None:
        """The watermark goes to +infinity: every window closes, every event-time
        timer fires (what a bounded input does in Flink)."""
        self.watermark(MAX_WATERMARK)

    async def aend_of_input(self) -> None:
        await self.awatermark(MAX_WATERMARK)

    # -- output and state -------------------------------------------------------------------

    def read(self, topic: Topic[Any] | str) -> list[Output]:
        """What was sent to ``topic`` so far, decoded by its serde (JSON if it has none)."""
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
            found.append(Output(_read_key(key_serde, sent.key), value, sent.timestamp_ms))
        return found

    @property
    def internal_topics(self) -> list[str]:
        """Topics Eddy made for the app (repartition topics)."""
        return [i.name for a in self.built.agents.values() for i in a.internal]

    def dead_letters(self) -> list[Sent]:
        """Records sent to the dead-letter topic; ``.reason`` says why."""
        return [s for s in self.sent if s.topic == self.settings.dead_letters]

    def windows(
        self, agent: str, key: str, from_ms: int = 0, to_ms: int = 2**62, limit: int = 10_000
    ) -> list[dict[str, Any]]:
        """``key``'s queryable window results of ``agent`` (oldest first), as REST
        serves them."""
        store = self._store_of(agent)
        return [row for _, row in window_rows(store, key, from_ms, to_ms, limit)]

    def has_data(self, agent: str, key: str) -> bool:
        return has_windows(self._store_of(agent), key)

    def stores(self) -> dict[str, PartitionStore]:
        """Each stage's committed state (partition 0), by stage name: to snapshot
        it, or to read a table no view serves."""
        return {stage.pipeline.name: stage.store for stage in self._stages}

    def state(self, agent: str, descriptor: StateDescriptor[T], key: str) -> Any:
        """``key``'s committed value of ``descriptor`` in ``agent`` (None if absent)."""
        return state_value(self._store_of(agent), descriptor, key)

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
            if stage.pipeline.name == agent:
                return stage.store
        raise KeyError(f"no agent {agent!r} runs in this driver")

    async def _start(self) -> None:
        """The first tick: every stage learns the processing time."""
        if self._closed:
            raise RuntimeError("the test driver is closed")
        running = asyncio.get_running_loop()
        if running is not self._loop:
            self._outer_loop = running
        if not self._started:
            self._started = True
            await self._tick_all()

    async def _tick_all(self) -> None:
        for stage in self._stages:
            await stage.tick(self.now_ms, stage.out)
            await self._settle(stage)

    async def _settle(self, stage: _Stage) -> None:
        await stage.checkpoint(stage.out)
        await self._forward()

    async def _deliver(self, records: list[Sent]) -> None:
        for sent in records:
            for stage in self._readers.get(sent.topic, []):
                await stage.record(sent.topic, sent, stage.out)
                await stage.checkpoint(stage.out)
                await self._forward()

    async def _forward(self) -> None:
        """Record what stages sent; feed it to stages that read it."""
        while self._pending:
            batch = self._pending[:]
            self._pending.clear()
            self.sent += batch
            await self._deliver([s for s in batch if s.topic in self._readers])

    def _run(self, step: Awaitable[T]) -> T:
        if _in_event_loop():
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
