"""Threshold updates for the sensor fleet (the broadcast control stream of
agents/sensor_alerts.py).

The alerts fire only for sensors that have a threshold, and a threshold of ``0.0``
removes one. So the stream starts by giving every sensor a threshold (the
pipeline has something to alert on at once), then now and then changes one,
sometimes removing it, so the pipeline's broadcast state really changes under
load instead of being set once.

Updates are delivered the moment they are made: control records have no event
time of their own, and the interesting disorder is on the readings side.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from eddy.examples.records import ThresholdUpdate
from tools.simulator.generator import MAX_SENSORS
from tools.simulator.schedule import (
    Scheduled,
    Stream,
    common_problems,
    probability_problem,
    raise_problems,
    range_problem,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdConfig:
    """What to send. Equal configs (seed included) give equal updates.

    Attributes:
        seed: Seeds the only random generator used.
        start_ms: When the first updates (one per sensor) are made.
        sensors: Fleet size; sensors are ``sensor_1`` .. ``sensor_N`` as in
            :class:`~tools.simulator.generator.SimulationConfig`.
        count: Updates to send, the initial ones included; ``None``: no limit.
        end_ms: No update is made after this time (the sensors' last reading,
            so a bounded sensor run does not trail threshold updates).
        interval_ms: Mean time between later updates; each gap is uniform in
            ``[interval/2, 3*interval/2]``.
        min_threshold_f: Smallest threshold given (temperature change, F).
        max_threshold_f: Largest threshold given.
        removal_probability: Chance that a later update is ``0.0``.
    """

    seed: int
    start_ms: int
    sensors: int = 10
    count: int | None = None
    end_ms: int | None = None
    interval_ms: int = 30_000
    min_threshold_f: float = 1.0
    max_threshold_f: float = 3.0
    removal_probability: float = 0.2

    def __post_init__(self) -> None:
        """Raises ConfigError naming every bad value."""
        raise_problems("thresholds", _problems(self))


def _problems(config: ThresholdConfig) -> Iterator[str]:
    yield from common_problems(start_ms=config.start_ms, count=config.count)
    if not 1 <= config.sensors <= MAX_SENSORS:
        yield f"sensors must be between 1 and {MAX_SENSORS}, got {config.sensors}"
    if config.end_ms is not None and config.end_ms < config.start_ms:
        yield f"end_ms {config.end_ms} is before start_ms {config.start_ms}"
    if config.interval_ms < 2:
        yield f"interval_ms must be at least 2, got {config.interval_ms}"
    yield from range_problem(
        "thresholds", config.min_threshold_f, config.max_threshold_f, minimum=0.01
    )
    yield from probability_problem("removal_probability", config.removal_probability)


def generate_thresholds(config: ThresholdConfig) -> Iterator[Scheduled[ThresholdUpdate]]:
    """Yield one update per sensor at ``start_ms``, then one every ~``interval_ms``.

    Thresholds are rounded to 0.01 F and never ``0.0`` except for removals.

    Yields:
        Updates in delivery order (which is also the order they were made).
    """
    rng = random.Random(config.seed)
    limit = config.count
    sent = 0

    def update(at_ms: int, sensor: int, threshold: float) -> Scheduled[ThresholdUpdate]:
        sensor_id = f"sensor_{sensor}"
        record = ThresholdUpdate(sensor_id=sensor_id, threshold=threshold)
        return Scheduled(at_ms, at_ms, Stream.THRESHOLDS, sensor_id, record)

    def threshold() -> float:
        return round(rng.uniform(config.min_threshold_f, config.max_threshold_f), 2)

    for sensor in range(1, config.sensors + 1):
        if limit is not None and sent >= limit:
            return
        yield update(config.start_ms, sensor, threshold())
        sent += 1
    at_ms = config.start_ms
    half = config.interval_ms // 2
    while limit is None or sent < limit:
        at_ms += rng.randint(half, config.interval_ms + half)
        if config.end_ms is not None and at_ms > config.end_ms:
            return
        sensor = rng.randint(1, config.sensors)
        removed = rng.random() < config.removal_probability
        yield update(at_ms, sensor, 0.0 if removed else threshold())
        sent += 1
