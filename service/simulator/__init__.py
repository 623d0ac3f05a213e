"""Simulated temperature sensors feeding Eddy's readings topic.

:mod:`.generator` is pure and deterministic (a seed fixes every reading and its
delivery order); :mod:`.producer` sends that stream to Kafka; :mod:`.command`
is the ``simulate`` CLI.
"""

from __future__ import annotations

from service.simulator.command import run_cli
from service.simulator.generator import Delivery, SimulationConfig, generate
from service.simulator.producer import SimulationStats, produce

__all__ = ["Delivery", "SimulationConfig", "SimulationStats", "generate", "produce", "run_cli"]
