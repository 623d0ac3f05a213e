"""Which scenarios a run simulates, and their streams merged into one timeline.

Each scenario gets its own seed derived from the run's seed and its name, so
adding a scenario to a run does not change what the others send. The sensors
scenario keeps the run's seed as is: ``simulate --seed S`` sends the same
readings it always did.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import BaseModel

from eddy.errors import ConfigError
from eddy.examples.records import SensorReading
from tools.simulator.game import GameConfig, generate_game
from tools.simulator.generator import Delivery, SimulationConfig, generate
from tools.simulator.schedule import Scheduled, Stream, merge
from tools.simulator.thresholds import ThresholdConfig, generate_thresholds
from tools.simulator.tweets import TweetConfig, generate_tweets
from tools.simulator.vehicles import VehicleConfig, generate_vehicles

# What ``--scenario all`` means; thresholds come with sensors.
ALL = ("sensors", "vehicles", "tweets", "game")
NAMES = (*ALL, "thresholds")


def parse_scenarios(text: str) -> tuple[str, ...]:
    """``"sensors,game"`` or ``"all"`` to scenario names, in :data:`NAMES` order.

    Raises:
        ConfigError: an unknown or empty name.
    """
    names = [name.strip().lower() for name in text.split(",")]
    if "all" in names:
        names = [name for name in names if name != "all"] + list(ALL)
    unknown = [name for name in names if name not in NAMES]
    if unknown or not names:
        shown = ", ".join(repr(name) for name in unknown) or "none"
        raise ConfigError(
            f"simulator: unknown scenario {shown}; choose from {', '.join(NAMES)} or all "
            "(comma-separated)"
        )
    return tuple(name for name in NAMES if name in names)


def scenario_seed(seed: int, name: str) -> int:
    """A seed for scenario ``name``, independent of the other scenarios."""
    if name == "sensors":
        return seed
    digest = hashlib.blake2b(f"{name}:{seed}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def sensor_timeline(config: SimulationConfig) -> Iterator[Scheduled[SensorReading]]:
    """The sensors scenario's deliveries in the shared :class:`Scheduled` form."""
    return (_scheduled(delivery) for delivery in generate(config))


def _scheduled(delivery: Delivery) -> Scheduled[SensorReading]:
    reading = delivery.reading
    return Scheduled(
        delivery.deliver_at_ms,
        reading.timestamp_ms,
        Stream.READINGS,
        reading.sensor_id,
        reading,
        late=delivery.buffered,
        starts_outage=delivery.starts_outage,
    )


@dataclass(frozen=True, slots=True)
class ScenarioPlan:
    """The scenarios of one run; ``None`` means not simulated.

    Attributes:
        start_ms: Where paced runs anchor the wall clock; every scenario
            starts here, so their event times advance together.
    """

    start_ms: int
    sensors: SimulationConfig | None = None
    thresholds: ThresholdConfig | None = None
    vehicles: VehicleConfig | None = None
    tweets: TweetConfig | None = None
    game: GameConfig | None = None

    def __post_init__(self) -> None:
        """Raises ConfigError for a plan with nothing in it."""
        if not self.streams:
            raise ConfigError("simulator: no scenario selected")

    @property
    def streams(self) -> tuple[Stream, ...]:
        """The streams this run sends, and so the topics that must exist."""
        chosen = [
            (self.sensors, (Stream.READINGS,)),
            (self.thresholds, (Stream.THRESHOLDS,)),
            (self.vehicles, (Stream.OBD, Stream.APP)),
            (self.tweets, (Stream.TWEETS,)),
            (self.game, (Stream.GAME,)),
        ]
        return tuple(stream for config, streams in chosen if config for stream in streams)

    @property
    def main_streams(self) -> tuple[Stream, ...]:
        """The streams ``--count`` bounds, one per scenario (progress counts these)."""
        if self.sensors is not None:
            return tuple(s for s in self.streams if s not in (Stream.APP, Stream.THRESHOLDS))
        return tuple(s for s in self.streams if s is not Stream.APP)

    @property
    def total_count(self) -> int | None:
        """Records of the main streams in a bounded run; ``None`` if any is endless."""
        counts = [
            config.count
            for config in (self.sensors, self.vehicles, self.tweets, self.game)
            if config is not None
        ]
        if self.sensors is None and self.thresholds is not None:
            counts.append(self.thresholds.count)
        if any(count is None for count in counts):
            return None
        return sum(count for count in counts if count is not None)

    def timeline(self) -> Iterator[Scheduled[BaseModel]]:
        """Every scenario's deliveries, merged in non-decreasing delivery order."""
        parts: list[Iterator[Scheduled[BaseModel]]] = []
        if self.sensors is not None:
            parts.append(sensor_timeline(self.sensors))
        if self.thresholds is not None:
            parts.append(generate_thresholds(self.thresholds))
        if self.vehicles is not None:
            parts.append(generate_vehicles(self.vehicles))
        if self.tweets is not None:
            parts.append(generate_tweets(self.tweets))
        if self.game is not None:
            parts.append(generate_game(self.game))
        return merge(*parts)
