"""The simulated sensor fleet: a pure, deterministic stream of deliveries.

Nothing here touches Kafka or the wall clock, so a seed fully determines the
output. That is what makes a failing end-to-end run reproducible: rerun the
simulator with the printed seed and the broker receives the same readings in
the same order.

Each reading has two times. ``reading.timestamp_ms`` is when it happened (event
time); ``Delivery.deliver_at_ms`` is when it reaches Kafka, in the same
simulated timeline. The gap between them is the disorder Eddy's watermarks must
absorb: usually under ``disorder_ms``, but now and then a sensor loses its
connection (like a phone in a subway tunnel) and its buffered readings all
arrive at once, tens of seconds late.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from eddy.errors import ConfigError
from eddy.examples.records import SensorReading

# Plausible outdoor Fahrenheit: wide enough for freezing alarms (< 32 F) and
# heat, narrow enough that a bug producing absurd values stands out.
MIN_TEMPERATURE_F = -40.0
MAX_TEMPERATURE_F = 130.0
START_RANGE_F = (20.0, 90.0)
STEP_STDDEV_F = 0.5
# Pull towards each sensor's starting temperature, per reading. Without it a
# pure random walk drifts into the clamp on long runs and sticks there.
MEAN_REVERSION = 0.002
MAX_SENSORS = 1_000_000
MAX_TIMESTAMP_MS = 2**53
NEVER_MS = 2**63


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationConfig:
    """What to simulate. Equal configs (seed included) give equal deliveries.

    Attributes:
        rate_per_s: Readings per second of event time, over all sensors.
        seed: Seeds the only random generator used.
        start_ms: Event time of the first reading (epoch ms).
        sensors: Number of sensors, named ``sensor_1`` .. ``sensor_N``.
        count: Readings to produce; ``None`` for an endless stream.
        disorder_ms: Largest delivery delay of a reading outside an outage.
        outage_probability: Chance, per sensor and second of event time, that
            the sensor goes offline.
        outage_min_ms: Shortest outage.
        outage_max_ms: Longest outage.
    """

    rate_per_s: float
    seed: int
    start_ms: int
    sensors: int = 10
    count: int | None = None
    disorder_ms: int = 1_000
    outage_probability: float = 0.002
    outage_min_ms: int = 10_000
    outage_max_ms: int = 40_000

    def __post_init__(self) -> None:
        """Reject configs that would break the generator's guarantees.

        Raises:
            ConfigError: naming the bad value, so the CLI can print it as is.
        """
        problems = list(_problems(self))
        if problems:
            raise ConfigError("simulator: " + "; ".join(problems))

    def event_time_ms(self, index: int) -> int:
        """Nominal event time of reading ``index``: the fleet's rate, evenly spaced."""
        return self.start_ms + math.floor(index * 1000.0 / self.rate_per_s)

    @property
    def last_event_time_ms(self) -> int | None:
        """Nominal event time of the last reading, or ``None`` when endless."""
        return None if self.count is None else self.event_time_ms(self.count - 1)


def _problems(config: SimulationConfig) -> Iterator[str]:
    if not 1 <= config.sensors <= MAX_SENSORS:
        yield f"sensors must be between 1 and {MAX_SENSORS}, got {config.sensors}"
    rate_ok = math.isfinite(config.rate_per_s) and config.rate_per_s > 0
    if not rate_ok:
        yield f"rate must be a positive number of readings per second, got {config.rate_per_s}"
    elif config.rate_per_s > 1000 * config.sensors:
        # Timestamps are whole milliseconds and (sensor, timestamp) must be unique.
        yield (
            f"rate {config.rate_per_s:g}/s is more than one reading per sensor per "
            f"millisecond; use at most {1000 * config.sensors}/s or more sensors"
        )
    if config.count is not None and config.count < 1:
        yield f"count must be at least 1, got {config.count}"
    if not 0 <= config.start_ms <= MAX_TIMESTAMP_MS:
        yield f"start_ms must be between 0 and {MAX_TIMESTAMP_MS}, got {config.start_ms}"
    elif rate_ok and (config.last_event_time_ms or 0) > MAX_TIMESTAMP_MS - config.sensors:
        yield "the run would go past the largest timestamp a reading may have"
    if config.disorder_ms < 0:
        yield f"disorder_ms must not be negative, got {config.disorder_ms}"
    if not 0.0 <= config.outage_probability <= 1.0:
        yield f"outage_probability must be in [0, 1], got {config.outage_probability}"
    if not 1 <= config.outage_min_ms <= config.outage_max_ms:
        yield (
            "outages need 1 <= outage_min_ms <= outage_max_ms, got "
            f"{config.outage_min_ms}..{config.outage_max_ms}"
        )


@dataclass(frozen=True, slots=True)
class Delivery:
    """One reading and the simulated time it is sent to Kafka.

    Attributes:
        deliver_at_ms: When the reading is sent, in event-time milliseconds;
            never before ``reading.timestamp_ms``.
        reading: The reading itself.
        buffered: The sensor was offline; the reading waited for the outage's end.
        starts_outage: This reading is the first one of an outage.
    """

    deliver_at_ms: int
    reading: SensorReading
    buffered: bool = False
    starts_outage: bool = False

    @property
    def delay_ms(self) -> int:
        """How late the reading reaches Kafka, relative to when it happened."""
        return self.deliver_at_ms - self.reading.timestamp_ms


class _Fleet:
    """Per-sensor state: temperature walk, last timestamp and outage end."""

    def __init__(self, config: SimulationConfig) -> None:
        self._config = config
        self._rng = random.Random(config.seed)
        self._ids = [f"sensor_{n}" for n in range(1, config.sensors + 1)]
        self._homes = [self._rng.uniform(*START_RANGE_F) for _ in self._ids]
        self._temperatures = list(self._homes)
        self._last_ms = [-1] * config.sensors
        self._outage_end_ms = [-1] * config.sensors
        # Outages end by the last reading of a bounded run, so it does not trail
        # on for tens of seconds after its last event.
        last = config.last_event_time_ms
        self._run_end_ms = NEVER_MS if last is None else last
        seconds_between = config.sensors / config.rate_per_s
        self._outage_chance = 1.0 - (1.0 - config.outage_probability) ** seconds_between

    def emit(self, index: int, nominal_ms: int) -> Delivery:
        """Reading ``index`` (round-robin over sensors) and when it is delivered."""
        sensor = index % self._config.sensors
        # Bumping keeps (sensor, timestamp) unique even when float rounding
        # puts two of a sensor's readings in the same millisecond.
        timestamp = max(nominal_ms, self._last_ms[sensor] + 1)
        self._last_ms[sensor] = timestamp
        reading = SensorReading(
            sensor_id=self._ids[sensor],
            timestamp_ms=timestamp,
            temperature=self._step(sensor),
        )
        starts = self._maybe_start_outage(sensor, timestamp)
        outage_end = self._outage_end_ms[sensor]
        if timestamp < outage_end:
            deliver_at = max(timestamp, min(outage_end, self._run_end_ms))
            return Delivery(deliver_at, reading, buffered=True, starts_outage=starts)
        delay = self._rng.randint(0, self._config.disorder_ms)
        return Delivery(timestamp + delay, reading)

    def _step(self, sensor: int) -> float:
        current = self._temperatures[sensor]
        pull = MEAN_REVERSION * (self._homes[sensor] - current)
        moved = current + self._rng.gauss(0.0, STEP_STDDEV_F) + pull
        clamped = min(MAX_TEMPERATURE_F, max(MIN_TEMPERATURE_F, moved))
        self._temperatures[sensor] = clamped
        return round(clamped, 2)

    def _maybe_start_outage(self, sensor: int, timestamp: int) -> bool:
        if timestamp < self._outage_end_ms[sensor] or self._rng.random() >= self._outage_chance:
            return False
        length = self._rng.randint(self._config.outage_min_ms, self._config.outage_max_ms)
        self._outage_end_ms[sensor] = timestamp + length
        return True


def generate(config: SimulationConfig) -> Iterator[Delivery]:
    """Yield the simulation's deliveries in non-decreasing ``deliver_at_ms`` order.

    A consumer that sends them in this order reproduces the simulated disorder
    on the broker. The iterator is lazy: a heap holds only readings still "in
    flight" (up to ``disorder_ms`` plus any outage backlog), so an endless
    stream (``count=None``) runs in bounded memory.

    Args:
        config: What to simulate; the seed makes the sequence repeatable.

    Yields:
        Every reading exactly once, each at or after its own event time.
    """
    fleet = _Fleet(config)
    in_flight: list[tuple[int, int, Delivery]] = []
    indices = itertools.count() if config.count is None else range(config.count)
    for index in indices:
        nominal_ms = config.event_time_ms(index)
        # Every later reading happens, and so is delivered, at or after
        # nominal_ms, so anything due by then can go out now.
        while in_flight and in_flight[0][0] <= nominal_ms:
            yield heapq.heappop(in_flight)[2]
        delivery = fleet.emit(index, nominal_ms)
        heapq.heappush(in_flight, (delivery.deliver_at_ms, index, delivery))
    while in_flight:
        yield heapq.heappop(in_flight)[2]
