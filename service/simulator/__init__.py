"""Simulated sources feeding Eddy's topics: sensors, thresholds, vehicles, tweets, a game.

Each scenario is a pure, deterministic generator (a seed fixes every record and
its delivery order): :mod:`.generator` (sensors), :mod:`.thresholds`,
:mod:`.vehicles`, :mod:`.tweets`, :mod:`.game`. :mod:`.scenarios` merges the
chosen ones into one timeline, :mod:`.producer` sends it to Kafka, and
:mod:`.command` is the ``simulate`` CLI.
"""

from __future__ import annotations

from service.simulator.command import run_cli
from service.simulator.game import GameConfig, generate_game
from service.simulator.generator import Delivery, SimulationConfig, generate
from service.simulator.producer import RunStats, SimulationStats, produce, produce_scenarios
from service.simulator.scenarios import ScenarioPlan, parse_scenarios
from service.simulator.schedule import Scheduled, Stream
from service.simulator.thresholds import ThresholdConfig, generate_thresholds
from service.simulator.tweets import TweetConfig, generate_tweets
from service.simulator.vehicles import VehicleConfig, generate_vehicles

__all__ = [
    "Delivery",
    "GameConfig",
    "RunStats",
    "ScenarioPlan",
    "Scheduled",
    "SimulationConfig",
    "SimulationStats",
    "Stream",
    "ThresholdConfig",
    "TweetConfig",
    "VehicleConfig",
    "generate",
    "generate_game",
    "generate_thresholds",
    "generate_tweets",
    "generate_vehicles",
    "parse_scenarios",
    "produce",
    "produce_scenarios",
    "run_cli",
]
