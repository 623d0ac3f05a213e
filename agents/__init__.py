"""Eddy's pipelines, one module each. ``build_pipelines`` is what a worker runs."""

from __future__ import annotations

from service.pipeline.base import Pipeline
from service.settings import Settings


def build_pipelines(settings: Settings) -> list[Pipeline]:
    from agents import sensor_averages

    return [sensor_averages.build(settings)]
