"""Eddy's pipelines, one module each. ``build_pipelines`` is what a worker runs."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.pipeline.base import Pipeline
    from service.settings import Settings

# name -> module with ``build(settings) -> Pipeline``; EDDY_PIPELINES picks from these.
PIPELINES = {
    "sensor_averages": "agents.sensor_averages",
    "eos_checker": "agents.eos_checker",
}


def build_pipelines(settings: Settings) -> list[Pipeline]:
    builders: list[Callable[[Settings], Pipeline]] = [
        import_module(PIPELINES[name]).build for name in settings.pipelines
    ]
    return [build(settings) for build in builders]
