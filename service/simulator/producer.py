"""Sending the simulation to Kafka, paced to the wall clock or as fast as possible.

Paced runs keep event time in step with the wall clock, so a worker reading the
topic sees a watermark that lags real time only by the simulated disorder; that
is what ``make run`` shows. Fast runs are for loading a topic and measuring
throughput.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from service.errors import BrokerUnavailableError, ConfigError
from service.settings import Settings
from service.simulator.generator import Delivery, SimulationConfig, generate

log = logging.getLogger(__name__)

# Awaiting every send would cost a broker round trip per reading; awaiting a
# batch of futures at once lets the producer pipeline them.
BATCH_SIZE = 1_000
LINGER_MS = 5
MAX_BATCH_BYTES = 64 * 1024
MIN_SLEEP_S = 0.002
LOG_EVERY_S = 10.0
REFRESH_EVERY_S = 0.1


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
class _Batcher:
    """Hands readings to the producer and collects their acknowledgements."""

    producer: Any
    topic: str
    stats: SimulationStats
    handed_over: int = 0
    _pending: list[tuple[asyncio.Future[Any], Delivery]] = field(default_factory=list)

    async def send(self, delivery: Delivery) -> None:
        reading = delivery.reading
        future = await self.producer.send(
            self.topic, value=reading.to_json(), key=reading.sensor_id.encode()
        )
        self._pending.append((future, delivery))
        self.handed_over += 1
        if len(self._pending) >= BATCH_SIZE:
            await self.flush()

    async def flush(self) -> None:
        """Wait for the pending acknowledgements; raises the first send error."""
        await asyncio.gather(*(future for future, _ in self._pending))
        self.settle()

    def settle(self) -> None:
        """Count the settled sends; after ``producer.stop()`` every send is settled."""
        for future, delivery in self._pending:
            if future.done() and not future.cancelled() and future.exception() is None:
                self.stats.sent += 1
                self.stats.outages += delivery.starts_outage
                self.stats.late += delivery.buffered
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

    def due(self, delivery: Delivery) -> float:
        """Monotonic time the delivery is due: now when not pacing."""
        if not self.pace:
            return time.monotonic()
        return self.started + (delivery.deliver_at_ms - self.start_ms) / 1000.0

    def over(self, due: float) -> bool:
        """Whether the run ends before a delivery due at ``due``."""
        deadline = self.deadline
        return self.stop.is_set() or (deadline is not None and due >= deadline)

    async def sleep_until(self, due: float) -> bool:
        """Sleep until ``due``; False if asked to stop meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), max(0.0, due - time.monotonic()))
        return not self.stop.is_set()


class _Report(Protocol):
    def update(self, handed_over: int, elapsed_s: float, *, final: bool = False) -> None: ...


class _ProgressReport:
    """A rich progress bar for bounded runs: by count, duration, or whichever ends first."""

    def __init__(self, progress: Progress, count: int | None, duration_s: float | None) -> None:
        self._progress = progress
        self._count = count
        self._duration_s = duration_s
        self._task = progress.add_task("starting", total=1.0)
        self._next_refresh = 0.0

    def update(self, handed_over: int, elapsed_s: float, *, final: bool = False) -> None:
        if elapsed_s < self._next_refresh and not final:
            return
        self._next_refresh = elapsed_s + REFRESH_EVERY_S
        done = [handed_over / self._count] if self._count else []
        done += [elapsed_s / self._duration_s] if self._duration_s else []
        text = f"sent {handed_over:,} readings"
        self._progress.update(self._task, completed=min(1.0, max(done)), description=text)


class _LogReport:
    """A log line every ``LOG_EVERY_S`` for unbounded or non-interactive runs."""

    def __init__(self) -> None:
        self._last_count = 0
        self._last_at = 0.0

    def update(self, handed_over: int, elapsed_s: float, *, final: bool = False) -> None:
        # The final count is in the run's summary; no need to log it twice.
        if final or elapsed_s - self._last_at < LOG_EVERY_S:
            return
        rate = (handed_over - self._last_count) / (elapsed_s - self._last_at)
        log.info(
            "simulator: sent %d readings (%.0f/s over the last %.0f s)",
            handed_over,
            rate,
            elapsed_s - self._last_at,
        )
        self._last_count, self._last_at = handed_over, elapsed_s


@contextlib.contextmanager
def _reporting(
    config: SimulationConfig, duration_s: float | None, progress: bool
) -> Iterator[_Report]:
    if not progress or (config.count is None and duration_s is None):
        yield _LogReport()
        return
    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn())
    with Progress(*columns, TimeElapsedColumn(), transient=False) as bar:
        yield _ProgressReport(bar, config.count, duration_s)


async def _send_all(
    deliveries: Iterable[Delivery], batcher: _Batcher, plan: _Plan, report: _Report
) -> None:
    for delivery in deliveries:
        due = plan.due(delivery)
        if plan.over(due):
            break
        if due - time.monotonic() > MIN_SLEEP_S:
            # Settle what is in flight before idling, so errors surface promptly.
            await batcher.flush()
            if not await plan.sleep_until(due):
                break
        await batcher.send(delivery)
        report.update(batcher.handed_over, time.monotonic() - plan.started)
    await batcher.flush()
    report.update(batcher.handed_over, time.monotonic() - plan.started, final=True)


def _new_producer(settings: Settings) -> Any:
    return AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap_servers,
        client_id=f"{settings.app_id}-simulator-{settings.worker_id}",
        enable_idempotence=True,
        acks="all",
        linger_ms=LINGER_MS,
        max_batch_size=MAX_BATCH_BYTES,
    )


async def _start(producer: Any, settings: Settings) -> None:
    """Start the producer and check the topic, so a typo fails now, not after 40 s."""
    try:
        await producer.start()
        metadata = await producer.client.fetch_all_metadata()
    except KafkaError as exc:
        await producer.stop()
        raise BrokerUnavailableError(
            f"Kafka did not answer at {settings.bootstrap_servers}: {exc}"
        ) from exc
    if settings.readings_topic not in metadata.topics():
        await producer.stop()
        raise ConfigError(
            f"topic {settings.readings_topic!r} does not exist: create it with "
            "`python -m service topics create` (make topics) or set EDDY_READINGS_TOPIC"
        )


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
    """Send the simulation to ``settings.readings_topic``, keyed by sensor id.

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
    producer = _new_producer(settings) if producer is None else producer
    await _start(producer, settings)
    stats = SimulationStats()
    plan = _Plan(pace, config.start_ms, stop or asyncio.Event(), duration_s)
    batcher = _Batcher(producer, settings.readings_topic, stats)
    try:
        with _reporting(config, duration_s, progress) as report:
            await _send_all(generate(config), batcher, plan, report)
    except KafkaError as exc:
        raise BrokerUnavailableError(
            f"lost Kafka at {settings.bootstrap_servers} after {batcher.handed_over:,} "
            f"readings: {exc}"
        ) from exc
    finally:
        await producer.stop()
        batcher.settle()
        stats.elapsed_s = time.monotonic() - plan.started
    return stats
