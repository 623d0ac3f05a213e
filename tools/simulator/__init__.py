"""Simulated sources feeding Eddy's topics: sensors, thresholds, vehicles, tweets, a game.

Each scenario is a pure, deterministic generator (a seed fixes every record and
its delivery order): :mod:`.generator` (sensors), :mod:`.thresholds`,
:mod:`.vehicles`, :mod:`.tweets`, :mod:`.game`. :mod:`.scenarios` merges the
chosen ones into one timeline, :mod:`.producer` sends it to Kafka, and
:mod:`.command` is the ``simulate`` CLI.
"""

from __future__ import annotations

from tools.simulator.command import run_cli
from tools.simulator.game import GameConfig, generate_game
from tools.simulator.generator import Delivery, SimulationConfig, generate
from tools.simulator.producer import RunStats, SimulationStats, produce, produce_scenarios
from tools.simulator.scenarios import ScenarioPlan, parse_scenarios
from tools.simulator.schedule import Scheduled, Stream
from tools.simulator.thresholds import ThresholdConfig, generate_thresholds
from tools.simulator.tweets import TweetConfig, generate_tweets
from tools.simulator.vehicles import VehicleConfig, generate_vehicles

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
