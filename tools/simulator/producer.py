"""Sending the simulation to Kafka, paced to the wall clock or as fast as possible.

Paced runs keep event time in step with the wall clock, so a worker reading the
topic sees a watermark that lags real time only by the simulated disorder; that
is what ``make run`` shows. Fast runs are for loading a topic and measuring
throughput.

Every scenario goes through one producer and one loop over the merged timeline
(:meth:`ScenarioPlan.timeline`), so concurrent scenarios share one pacing clock
and their event times advance together.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from pydantic import BaseModel

from eddy.errors import BrokerUnavailableError, ConfigError
from eddy.examples.records import SensorReading
from eddy.kafka_clients import connection_kwargs
from eddy.settings import Settings
from tools.simulator.generator import SimulationConfig
from tools.simulator.reporting import Report, reporting
from tools.simulator.scenarios import ScenarioPlan, sensor_timeline
from tools.simulator.schedule import Scheduled, Stream

log = logging.getLogger(__name__)

# Awaiting every send would cost a broker round trip per reading; awaiting a
# batch of futures at once lets the producer pipeline them.
BATCH_SIZE = 1_000
LINGER_MS = 5
MAX_BATCH_BYTES = 64 * 1024
MIN_SLEEP_S = 0.002


@dataclass
class SimulationStats:
    """What a run sent, counted from the broker's acknowledgements.

    Attributes:
        sent: Readings the broker acknowledged.
        outages: Outages whose first reading was acknowledged.
        late: Acknowledged readings that waited out an outage.
        elapsed_s: Wall time from the producer's start to its flushed stop.
    """

    sent: int = 0
    outages: int = 0
    late: int = 0
    elapsed_s: float = 0.0

    @property
    def throughput_per_s(self) -> float:
        """Acknowledged readings per wall-clock second."""
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass
class RunStats:
    """What a multi-scenario run sent, per stream.

    Attributes:
        streams: Acknowledged records per stream (each ``elapsed_s`` is the run's).
        topics: The topic each stream went to.
        elapsed_s: Wall time from the producer's start to its flushed stop.
    """

    streams: dict[Stream, SimulationStats]
    topics: dict[Stream, str]
    elapsed_s: float = 0.0

    @property
    def sent(self) -> int:
        return sum(stats.sent for stats in self.streams.values())

    @property
    def throughput_per_s(self) -> float:
        """Acknowledged records per wall-clock second, over all streams."""
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0


def topic_for(stream: Stream, settings: Settings) -> str:
    """The topic of ``stream`` on the broker (``EDDY_TOPIC_PREFIX`` in front)."""
    return settings.topic(stream.value)


def readings_encoders(
    settings: Settings, topics: Mapping[Stream, str]
) -> dict[Stream, Callable[[BaseModel], bytes]]:
    """Avro readings when EDDY_READINGS_FORMAT=avro (the sensor agents' setting, so
    one variable switches the simulator and the agents), through the same serde
    the agents read with; its schema registered under ``<topic>-value``."""
    from eddy.examples.settings import SensorSettings
    from eddy.examples.topics import readings
    from eddy.schemas.base import SchemaSerde
    from eddy.schemas.binder import SchemaBinder
    from eddy.settings import build

    topic = readings(build(SensorSettings, {}))
    if Stream.READINGS not in topics or not isinstance(topic.serde, SchemaSerde):
        return {}
    subject = f"{topics[Stream.READINGS]}-value"
    bound = SchemaBinder().bind_output(topic.serde, subject, topic.value)
    bound.prepare()  # a refused schema stops the simulator before it sends anything
    return {Stream.READINGS: bound.encode}


def encode(record: BaseModel) -> bytes:
    """A record's JSON value, as the pipelines decode it."""
    if isinstance(record, SensorReading):
        return record.to_json()
    return orjson.dumps(record.model_dump(mode="json"))


@dataclass
class _Batcher:
    """Hands records to the producer and collects their acknowledgements."""

    producer: Any
    topics: Mapping[Stream, str]
    stats: Mapping[Stream, SimulationStats]
    # Streams whose records count as progress (the ones --count bounds).
    counted: frozenset[Stream]
    # A stream's own encoder (Avro readings); the others are JSON.
    encoders: Mapping[Stream, Callable[[BaseModel], bytes]] = field(default_factory=dict)
    handed_over: int = 0
    _pending: list[tuple[asyncio.Future[Any], Scheduled[BaseModel]]] = field(default_factory=list)

    async def send(self, item: Scheduled[BaseModel]) -> None:
        future = await self.producer.send(
            self.topics[item.stream],
            value=self.encoders.get(item.stream, encode)(item.record),
            key=item.key.encode(),
        )
        self._pending.append((future, item))
        self.handed_over += item.stream in self.counted
        if len(self._pending) >= BATCH_SIZE:
            await self.flush()

    async def flush(self) -> None:
        """Wait for the pending acknowledgements; raises the first send error."""
        await asyncio.gather(*(future for future, _ in self._pending))
        self.settle()

    def settle(self) -> None:
        """Count the settled sends; after ``producer.stop()`` every send is settled."""
        for future, item in self._pending:
            if future.done() and not future.cancelled() and future.exception() is None:
                stats = self.stats[item.stream]
                stats.sent += 1
                stats.outages += item.starts_outage
                stats.late += item.late
        self._pending.clear()


@dataclass
class _Plan:
    """When each delivery may go out, and when the run must end."""

    pace: bool
    start_ms: int
    stop: asyncio.Event
    duration_s: float | None
    started: float = field(default_factory=time.monotonic)

    @property
    def deadline(self) -> float | None:
        return None if self.duration_s is None else self.started + self.duration_s

    def due(self, item: Scheduled[BaseModel]) -> float:
        """Monotonic time the delivery is due: now when not pacing."""
        if not self.pace:
            return time.monotonic()
        return self.started + (item.deliver_at_ms - self.start_ms) / 1000.0

    def over(self, due: float) -> bool:
        """Whether the run ends before a delivery due at ``due``."""
        deadline = self.deadline
        return self.stop.is_set() or (deadline is not None and due >= deadline)

    async def sleep_until(self, due: float) -> bool:
        """Sleep until ``due``; False if asked to stop meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), max(0.0, due - time.monotonic()))
        return not self.stop.is_set()


async def _send_all(
    items: Iterable[Scheduled[BaseModel]], batcher: _Batcher, plan: _Plan, report: Report
) -> None:
    for item in items:
        due = plan.due(item)
        if plan.over(due):
            break
        if due - time.monotonic() > MIN_SLEEP_S:
            # Settle what is in flight before idling, so errors surface promptly.
            await batcher.flush()
            if not await plan.sleep_until(due):
                break
        await batcher.send(item)
        report.update(batcher.handed_over, time.monotonic() - plan.started)
    await batcher.flush()
    report.update(batcher.handed_over, time.monotonic() - plan.started, final=True)


def _new_producer(settings: Settings) -> Any:
    return AIOKafkaProducer(
        **connection_kwargs(settings),
        client_id=f"{settings.app_id}-simulator-{settings.worker_id}",
        enable_idempotence=True,
        acks="all",
        linger_ms=LINGER_MS,
        max_batch_size=MAX_BATCH_BYTES,
    )


async def _start(producer: Any, settings: Settings, topics: Mapping[Stream, str]) -> None:
    """Start the producer and check the topics, so a typo fails now, not after 40 s.

    Raises:
        BrokerUnavailableError: Kafka did not answer.
        ConfigError: a topic does not exist; the message names it.
    """
    try:
        await producer.start()
        metadata = await producer.client.fetch_all_metadata()
    except KafkaError as exc:
        await producer.stop()
        raise BrokerUnavailableError(
            f"Kafka did not answer at {settings.bootstrap_servers}: {exc}"
        ) from exc
    existing = metadata.topics()
    missing = {stream: topic for stream, topic in topics.items() if topic not in existing}
    if missing:
        await producer.stop()
        raise ConfigError(_missing_topics_message(missing))


def _missing_topics_message(missing: Mapping[Stream, str]) -> str:
    """Name every missing topic and the ways to get it."""
    if len(missing) == 1:
        (topic,) = missing.values()
        what = f"topic {topic!r} does not exist: create it"
    else:
        what = f"topics {', '.join(map(repr, missing.values()))} do not exist: create them"
    settings_hint = []
    if Stream.READINGS in missing:
        settings_hint.append("EDDY_READINGS_TOPIC")
    if set(missing) - {Stream.READINGS}:
        settings_hint.append("EDDY_TOPIC_PREFIX")
    return (
        f"{what} with `python -m eddy topics create` (make topics) or by starting the "
        f"worker whose pipelines read them, or set {' / '.join(settings_hint)}"
    )


async def _run(
    items: Iterable[Scheduled[BaseModel]],
    topics: Mapping[Stream, str],
    counted: Iterable[Stream],
    settings: Settings,
    *,
    start_ms: int,
    count: int | None,
    noun: str,
    pace: bool,
    duration_s: float | None,
    progress: bool,
    stop: asyncio.Event | None,
    producer: Any,
) -> RunStats:
    producer = _new_producer(settings) if producer is None else producer
    await _start(producer, settings, topics)
    stats = RunStats({stream: SimulationStats() for stream in topics}, dict(topics))
    plan = _Plan(pace, start_ms, stop or asyncio.Event(), duration_s)
    encoders = readings_encoders(settings, topics)
    batcher = _Batcher(producer, topics, stats.streams, frozenset(counted), encoders)
    try:
        with reporting(count, duration_s, progress, noun) as report:
            await _send_all(items, batcher, plan, report)
    except KafkaError as exc:
        raise BrokerUnavailableError(
            f"lost Kafka at {settings.bootstrap_servers} after {batcher.handed_over:,} "
            f"{noun}: {exc}"
        ) from exc
    finally:
        await producer.stop()
        batcher.settle()
        stats.elapsed_s = time.monotonic() - plan.started
        for stream_stats in stats.streams.values():
            stream_stats.elapsed_s = stats.elapsed_s
    return stats


async def produce(
    config: SimulationConfig,
    settings: Settings,
    *,
    pace: bool,
    duration_s: float | None,
    progress: bool,
    stop: asyncio.Event | None = None,
    producer: Any = None,
) -> SimulationStats:
    """Send the sensors scenario alone to the readings topic, keyed by sensor id.

    Args:
        config: What to simulate.
        settings: Broker address and topic.
        pace: Send each reading when the wall clock reaches its delivery time
            (relative to ``config.start_ms``); otherwise send as fast as possible.
        duration_s: Stop after this many wall-clock seconds; ``None`` for no limit.
        progress: Show a progress bar when the run is bounded.
        stop: Set it to end the run gracefully (the CLI sets it on Ctrl-C).
        producer: An unstarted producer to use instead of a new one (tests).

    Returns:
        Counts of what the broker acknowledged. Everything handed to the
        producer is flushed before returning, also when the run is cancelled.

    Raises:
        BrokerUnavailableError: Kafka did not answer, or stopped answering.
        ConfigError: the readings topic does not exist.
    """
    topics = {Stream.READINGS: topic_for(Stream.READINGS, settings)}
    stats = await _run(
        sensor_timeline(config),
        topics,
        topics,
        settings,
        start_ms=config.start_ms,
        count=config.count,
        noun="readings",
        pace=pace,
        duration_s=duration_s,
        progress=progress,
        stop=stop,
        producer=producer,
    )
    return stats.streams[Stream.READINGS]


async def produce_scenarios(
    plan: ScenarioPlan,
    settings: Settings,
    *,
    pace: bool,
    duration_s: float | None,
    progress: bool,
    stop: asyncio.Event | None = None,
    producer: Any = None,
) -> RunStats:
    """Send every scenario of ``plan`` concurrently, through one producer.

    Each stream goes to its topic (:func:`topic_for`), keyed by its entity
    (sensor, vehicle, user, team). Arguments are as for :func:`produce`;
    pacing is relative to ``plan.start_ms``. A bounded run ends when every
    scenario's last delivery is sent, which for late streams (the app, phones
    in tunnels) is after their last event.

    Raises:
        BrokerUnavailableError: Kafka did not answer, or stopped answering.
        ConfigError: a topic does not exist; the message names every missing one.
    """
    topics = {stream: topic_for(stream, settings) for stream in plan.streams}
    return await _run(
        plan.timeline(),
        topics,
        plan.main_streams,
        settings,
        start_ms=plan.start_ms,
        count=plan.total_count,
        noun="records",
        pace=pace,
        duration_s=duration_s,
        progress=progress,
        stop=stop,
        producer=producer,
    )
