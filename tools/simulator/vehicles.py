"""Vehicles reporting their speed twice: the OBD device and the driver's app
(agents/vehicle_speed.py).

The vehicle speed check joins the two per vehicle and second, so the simulation
reproduces what makes that hard:

* The OBD device sends three records a second, all stamped with the same whole
  second and the same speed (the device's clock has second resolution), with up
  to ``obd_disorder_ms`` of network disorder. Now and then it drops out for
  20-60 s; those records are lost, not delayed, so some seconds have only an
  app record and the join must not wait for them forever.
* The app sends one record a second, stamped a few ms after the second, and
  uploads in batches: each record reaches Kafka 10-150 s after it happened.
  The speed is the OBD speed plus small noise (within 3 km/h), except in about
  10% of seconds, where it is off by 10-25 km/h: those are the disagreements
  the check exists to find, far enough from the noise that any tolerance
  between 3 and 10 km/h separates them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from eddy.examples.records import VehicleSpeed
from tools.simulator.schedule import (
    InFlight,
    Scheduled,
    Stream,
    common_problems,
    probability_problem,
    raise_problems,
    range_problem,
    whole_second_at_or_after,
)

OBD_RECORDS_PER_SECOND = 3
MAX_SPEED_KMH = 130.0
MAX_VEHICLES = 100_000
# The walk's acceleration (km/h per second): an AR(1) process, clamped to what
# a car can do, plus a pull towards the vehicle's cruising speed so it neither
# sticks at 0 nor at the top speed.
ACCEL_MEMORY = 0.7
ACCEL_STDDEV = 1.5
MAX_ACCEL = 8.0
CRUISE_PULL = 0.02
CRUISE_RANGE = (30.0, 110.0)
APP_NOISE_KMH = 3.0
DISAGREEMENT_KMH = (10.0, 25.0)
APP_JITTER_MS = (1, 30)
APP_BATCH_MAX_S = 60


@dataclass(frozen=True, slots=True, kw_only=True)
class VehicleConfig:
    """What to simulate. Equal configs (seed included) give equal deliveries.

    Attributes:
        seed: Seeds the only random generator used.
        start_ms: Simulation start; the first records are stamped with the
            first whole second at or after it.
        vehicles: Number of vehicles, ``vehicle_1`` .. ``vehicle_N``.
        count: OBD records to send (the main stream); ``None``: no limit. The
            app stream covers the same seconds.
        obd_disorder_ms: Largest delivery delay of an OBD record.
        dropout_probability: Chance, per vehicle and second, that the OBD
            device drops out.
        dropout_min_s: Shortest dropout, in seconds.
        dropout_max_s: Longest dropout, in seconds.
        app_lag_min_ms: Least time between an app record and its upload.
        app_lag_max_ms: Most time between an app record and its upload.
        disagreement_probability: Chance that an app record is off by 10-25 km/h.
    """

    seed: int
    start_ms: int
    vehicles: int = 5
    count: int | None = None
    obd_disorder_ms: int = 2_000
    dropout_probability: float = 0.004
    dropout_min_s: int = 20
    dropout_max_s: int = 60
    app_lag_min_ms: int = 10_000
    app_lag_max_ms: int = 150_000
    disagreement_probability: float = 0.1

    def __post_init__(self) -> None:
        """Raises ConfigError naming every bad value."""
        raise_problems("vehicles", _problems(self))


def _problems(config: VehicleConfig) -> Iterator[str]:
    yield from common_problems(start_ms=config.start_ms, count=config.count)
    if not 1 <= config.vehicles <= MAX_VEHICLES:
        yield f"vehicles must be between 1 and {MAX_VEHICLES}, got {config.vehicles}"
    if config.obd_disorder_ms < 0:
        yield f"obd_disorder_ms must not be negative, got {config.obd_disorder_ms}"
    yield from probability_problem("dropout_probability", config.dropout_probability)
    yield from range_problem("dropouts", config.dropout_min_s, config.dropout_max_s, minimum=1)
    yield from range_problem(
        "app lag (ms)", config.app_lag_min_ms, config.app_lag_max_ms, minimum=1_000
    )
    if config.app_lag_max_ms - config.app_lag_min_ms < 1_000:
        # An upload holds at least one whole second of records.
        yield "the app lag range must span at least 1000 ms"
    yield from probability_problem("disagreement_probability", config.disagreement_probability)


@dataclass(slots=True)
class _Vehicle:
    """One vehicle's speed walk, dropout and the app's current upload batch."""

    vehicle_id: str
    speed: float
    cruise: float
    accel: float = 0.0
    # Seconds (indices) before which the OBD device is silent.
    dropout_until_s: int = 0
    batch_end_s: int = 0
    batch: list[VehicleSpeed] = field(default_factory=list)
    last_upload_ms: int = 0


class _Fleet:
    def __init__(self, config: VehicleConfig) -> None:
        self._config = config
        self._rng = random.Random(config.seed)
        self.first_ms = whole_second_at_or_after(config.start_ms)
        self.vehicles = [
            _Vehicle(
                vehicle_id=f"vehicle_{n}",
                speed=self._rng.uniform(*CRUISE_RANGE),
                cruise=self._rng.uniform(*CRUISE_RANGE),
            )
            for n in range(1, config.vehicles + 1)
        ]
        for vehicle in self.vehicles:
            vehicle.batch_end_s = self._batch_span_s()

    def second_ms(self, second: int) -> int:
        return self.first_ms + second * 1000

    def step(self, vehicle: _Vehicle) -> float:
        """Advance the speed walk by one second; the new speed, rounded to 0.1."""
        rng = self._rng
        pull = CRUISE_PULL * (vehicle.cruise - vehicle.speed)
        accel = ACCEL_MEMORY * vehicle.accel + rng.gauss(0.0, ACCEL_STDDEV) + pull
        vehicle.accel = min(MAX_ACCEL, max(-MAX_ACCEL, accel))
        speed = vehicle.speed + vehicle.accel
        if not 0.0 <= speed <= MAX_SPEED_KMH:
            speed = min(MAX_SPEED_KMH, max(0.0, speed))
            vehicle.accel = 0.0
        vehicle.speed = speed
        return round(speed, 1)

    def obd_silent(self, vehicle: _Vehicle, second: int) -> bool:
        """Whether the device sends nothing this second (maybe starting a dropout)."""
        if second < vehicle.dropout_until_s:
            return True
        # Not in the second a dropout ends: a bounded run always makes progress.
        can_start = second > vehicle.dropout_until_s or second == 0
        if can_start and self._rng.random() < self._config.dropout_probability:
            length = self._rng.randint(self._config.dropout_min_s, self._config.dropout_max_s)
            vehicle.dropout_until_s = second + length
            return True
        return False

    def obd(self, vehicle: _Vehicle, second: int, speed: float) -> Scheduled[VehicleSpeed]:
        at_ms = self.second_ms(second)
        record = VehicleSpeed(vehicle_id=vehicle.vehicle_id, timestamp_ms=at_ms, speed_kmh=speed)
        deliver_at = at_ms + self._rng.randint(0, self._config.obd_disorder_ms)
        return Scheduled(deliver_at, at_ms, Stream.OBD, vehicle.vehicle_id, record)

    def app(self, vehicle: _Vehicle, second: int, obd_speed: float) -> None:
        """Record the app's reading of this second into the vehicle's batch."""
        rng = self._rng
        if rng.random() < self._config.disagreement_probability:
            off = round(rng.uniform(*DISAGREEMENT_KMH), 1)
            # Off in a direction that stays a valid speed, so it stays a disagreement.
            off = -off if obd_speed - off >= 0.0 and rng.random() < 0.5 else off
        else:
            off = round(rng.uniform(-APP_NOISE_KMH, APP_NOISE_KMH), 1)
        speed = max(0.0, round(obd_speed + off, 1))
        at_ms = self.second_ms(second) + rng.randint(*APP_JITTER_MS)
        record = VehicleSpeed(vehicle_id=vehicle.vehicle_id, timestamp_ms=at_ms, speed_kmh=speed)
        vehicle.batch.append(record)

    def upload(self, vehicle: _Vehicle, end_s: int) -> Iterator[Scheduled[VehicleSpeed]]:
        """Send the batch of seconds before ``end_s``; start the next batch.

        The upload delay is drawn so every record's lag is within the
        configured range: the newest is at least ``app_lag_min_ms`` old (it
        happened in the last second), the oldest at most ``app_lag_max_ms``.
        """
        if not vehicle.batch:
            return
        config = self._config
        oldest_ms = vehicle.batch[0].timestamp_ms
        end_ms = self.second_ms(end_s)
        latest = oldest_ms + config.app_lag_max_ms
        upload_ms = self._rng.randint(min(end_ms + config.app_lag_min_ms, latest), latest)
        # Batches go out in order; waiting for the previous one keeps lags in range.
        upload_ms = max(upload_ms, vehicle.last_upload_ms)
        vehicle.last_upload_ms = upload_ms
        for record in vehicle.batch:
            yield Scheduled(
                upload_ms, record.timestamp_ms, Stream.APP, vehicle.vehicle_id, record, late=True
            )
        vehicle.batch.clear()
        vehicle.batch_end_s = end_s + self._batch_span_s()

    def _batch_span_s(self) -> int:
        spread_s = (self._config.app_lag_max_ms - self._config.app_lag_min_ms) // 1000
        return self._rng.randint(1, min(APP_BATCH_MAX_S, spread_s))


def generate_vehicles(config: VehicleConfig) -> Iterator[Scheduled[VehicleSpeed]]:
    """Yield both streams' deliveries, merged, in non-decreasing delivery order.

    Lazy: only records still in flight are held (at most ``app_lag_max_ms`` of
    app records per vehicle), so an endless run uses bounded memory. A bounded
    run stops after ``count`` OBD records (the last second may have fewer than
    three per vehicle) and then uploads every app batch still open, each as
    late as its lag says: the run ends up to ``app_lag_max_ms`` after its last
    OBD record.

    Yields:
        OBD records (``stream`` ``Stream.OBD``) and app records (``Stream.APP``,
        ``late=True``), each at or after its own event time.
    """
    fleet = _Fleet(config)
    in_flight: InFlight[VehicleSpeed] = InFlight()
    remaining = config.count
    second = 0
    while remaining is None or remaining > 0:
        yield from in_flight.due(fleet.second_ms(second))
        for vehicle in fleet.vehicles:
            speed = fleet.step(vehicle)
            if not fleet.obd_silent(vehicle, second):
                sends = OBD_RECORDS_PER_SECOND
                if remaining is not None:
                    sends = min(sends, remaining)
                for _ in range(sends):
                    in_flight.push(fleet.obd(vehicle, second, speed))
                remaining = None if remaining is None else remaining - sends
            fleet.app(vehicle, second, speed)
            if second + 1 >= vehicle.batch_end_s:
                for item in fleet.upload(vehicle, second + 1):
                    in_flight.push(item)
        second += 1
    for vehicle in fleet.vehicles:
        for item in fleet.upload(vehicle, second):
            in_flight.push(item)
    yield from in_flight.drain()
