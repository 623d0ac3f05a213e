"""Eddy's pipelines, one module each. ``build_pipelines`` is what a worker runs.

``EDDY_PIPELINES`` picks from :data:`PIPELINES` (all reference pipelines by
default). A name maps to ``module:function``; the function builds the pipeline
from the settings.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.pipeline.base import Pipeline
    from service.settings import Settings

PIPELINES = {
    "sensor_averages": "agents.sensor_averages:build",
    "sensor_minmax": "agents.sensor_minmax:build",
    "sensor_alerts": "agents.sensor_alerts:build",
    "sensor_counts": "agents.sensor_counts:build",
    "vehicle_speed": "agents.vehicle_speed:build",
    "hashtags": "agents.hashtags:build_extract",
    "hashtag_counts": "agents.hashtags:build_counts",
    "team_powerups": "agents.team_powerups:build",
    "eos_checker": "agents.eos_checker:build",
    "sensor_rooms": "agents.sensor_rooms:build",
    "postgres_sink": "agents.postgres_sink:build",
}

# Pipelines that need a service besides Kafka (the room lookup, PostgreSQL): not
# in the default set, not in the synchronous replay; make run starts their services.
EXTERNAL = frozenset({"sensor_rooms", "postgres_sink"})


def builder(name: str) -> Callable[[Settings], Pipeline]:
    module, _, function = PIPELINES[name].partition(":")
    build: Callable[[Settings], Pipeline] = getattr(import_module(module), function)
    return build


def build_pipelines(settings: Settings) -> list[Pipeline]:
    return [builder(name)(settings) for name in settings.pipelines]
