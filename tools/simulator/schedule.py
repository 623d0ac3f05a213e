"""What every scenario yields, and the small machinery they share.

A scenario is a pure generator of :class:`Scheduled` items: a record, the stream
it belongs to, when it happened and when it reaches Kafka, all in one simulated
timeline. Topic names are not known here (they depend on settings); the
producer maps each :class:`Stream` to its topic. Keeping Kafka and the wall
clock out is what makes a seed reproduce a run exactly.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

from pydantic import BaseModel

from eddy.errors import ConfigError

# New scenarios leave ample room below the records' 2**53 timestamp limit, so a
# long run never needs an end-of-time check per record.
MAX_START_MS = 2**52

R = TypeVar("R", bound=BaseModel)
# Covariant, so a timeline of threshold updates is also a timeline of records.
R_co = TypeVar("R_co", bound=BaseModel, covariant=True)


class Stream(StrEnum):
    """A simulated stream; the value is its topic name without ``EDDY_TOPIC_PREFIX``."""

    READINGS = "sensor-readings"
    THRESHOLDS = "sensor-thresholds"
    OBD = "vehicle-obd-speed"
    APP = "vehicle-app-speed"
    TWEETS = "tweets"
    GAME = "game-events"


@dataclass(frozen=True, slots=True)
class Scheduled(Generic[R_co]):
    """One record and the simulated time it is sent to Kafka.

    Attributes:
        deliver_at_ms: When it is sent, in the simulated timeline; never before
            ``happened_ms``.
        happened_ms: Its event time (for records without a timestamp field,
            such as threshold updates, when the change was made).
        stream: Which stream, and so which topic, it goes to.
        key: The Kafka key (the entity the pipelines key by).
        record: The record itself.
        late: Held back by an outage (a device offline, a phone in a tunnel, an
            app uploading in batches) rather than ordinary network disorder.
        starts_outage: The first record of an outage.
    """

    deliver_at_ms: int
    happened_ms: int
    stream: Stream
    key: str
    record: R_co
    late: bool = False
    starts_outage: bool = False

    @property
    def delay_ms(self) -> int:
        """How late the record reaches Kafka, relative to when it happened."""
        return self.deliver_at_ms - self.happened_ms


class InFlight(Generic[R]):
    """Records generated but not yet delivered, released in delivery order.

    Scenarios generate records in event-time order and push them here with a
    delivery time at or after their event time. Once the scenario's clock
    reaches ``now_ms``, nothing generated later can be due before ``now_ms``,
    so everything due by then can be yielded: that gives a globally ordered
    output while holding only the records still "on the wire".
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Scheduled[R]]] = []
        # Ties break by insertion order, so a seed fixes the exact sequence.
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, item: Scheduled[R]) -> None:
        heapq.heappush(self._heap, (item.deliver_at_ms, next(self._order), item))

    def due(self, now_ms: int) -> Iterator[Scheduled[R]]:
        """Pop everything due at or before ``now_ms``, earliest first."""
        while self._heap and self._heap[0][0] <= now_ms:
            yield heapq.heappop(self._heap)[2]

    def drain(self) -> Iterator[Scheduled[R]]:
        """Pop everything left, earliest first (the run has ended)."""
        while self._heap:
            yield heapq.heappop(self._heap)[2]


def merge(*timelines: Iterable[Scheduled[BaseModel]]) -> Iterator[Scheduled[BaseModel]]:
    """Interleave ordered timelines into one, still in delivery order (lazily).

    Ties keep the order of ``timelines``, so the merged sequence is as
    deterministic as its parts.
    """
    return heapq.merge(*timelines, key=lambda item: item.deliver_at_ms)


def raise_problems(scope: str, problems: Iterable[str]) -> None:
    """Raise one :class:`ConfigError` listing every problem, or nothing.

    Raises:
        ConfigError: ``"simulator: <scope>: <problem>; <problem>"``.
    """
    found = list(problems)
    if found:
        raise ConfigError(f"simulator: {scope}: " + "; ".join(found))


def common_problems(*, start_ms: int, count: int | None) -> Iterator[str]:
    """The checks every scenario config shares."""
    if not 0 <= start_ms <= MAX_START_MS:
        yield f"start_ms must be between 0 and {MAX_START_MS}, got {start_ms}"
    if count is not None and count < 1:
        yield f"count must be at least 1, got {count}"


def probability_problem(name: str, value: float) -> Iterator[str]:
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        yield f"{name} must be in [0, 1], got {value}"


def range_problem(name: str, low: float, high: float, *, minimum: float = 0) -> Iterator[str]:
    """A ``low..high`` pair must be ordered and at least ``minimum``."""
    if not (math.isfinite(low) and math.isfinite(high) and minimum <= low <= high):
        yield f"{name} needs {minimum:g} <= min <= max, got {low:g}..{high:g}"


def whole_second_at_or_after(ms: int) -> int:
    """The first whole second (epoch ms divisible by 1000) at or after ``ms``."""
    return -(-ms // 1000) * 1000
