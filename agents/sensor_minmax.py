"""The seeds' ``MinMaxTemp`` (E4): lowest and highest temperature per sensor per
5 s window, computed incrementally, with a process-window function that adds the
window's end, as the book's ``HighAndLowTempProcessFunction`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from service.eventtime import BoundedOutOfOrderness, Tumbling, WindowContext, WindowSpec
from service.eventtime.functions import MinMax
from service.pipeline.windowed import EventTime, WindowedAggregation
from service.records import SensorReading
from service.settings import Settings

NAME = "sensor_minmax"


class AddWindowEnd:
    """Incremental min/max in, ``MinMaxTemp(id, min, max, end_ts)`` out."""

    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        (low_high,) = elements
        return [{**low_high, "end_ts": ctx.window.end_ms}]


def build(settings: Settings) -> WindowedAggregation:
    return WindowedAggregation(
        name=NAME,
        source=settings.readings_topic,
        value_type=SensorReading,
        event_time=EventTime(
            key=lambda r: r.sensor_id,
            timestamp_ms=lambda r: r.timestamp_ms,
            watermark=BoundedOutOfOrderness(bound_ms=settings.watermark_bound_ms),
        ),
        window=WindowSpec(
            Tumbling(size_ms=settings.window_size_ms),
            aggregate=MinMax(lambda r: r.temperature),
            process=AddWindowEnd(),
        ),
        sink=settings.topic("sensor-minmax"),
        key_field="sensor_id",
        results_retention_ms=settings.results_retention_ms,
    )
