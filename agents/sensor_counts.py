"""The seeds' late-data example (E11): readings per sensor per 10 s window, with
5 s of allowed lateness. A window emits ``first`` when the watermark passes its
end, then an ``update`` for each reading arriving within the lateness; readings
later than that go to their own topic.
"""

from __future__ import annotations

from typing import Any

from service.eventtime import BoundedOutOfOrderness, Count, Tumbling, WindowResult, WindowSpec
from service.pipeline.windowed import EventTime, WindowedAggregation
from service.records import SensorReading
from service.settings import Settings

NAME = "sensor_counts"
WINDOW_MS = 10_000
ALLOWED_LATENESS_MS = 5_000


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
            Tumbling(size_ms=WINDOW_MS),
            aggregate=Count(),
            allowed_lateness_ms=ALLOWED_LATENESS_MS,
        ),
        sink=settings.topic("sensor-counts"),
        late_output=settings.topic("sensor-counts-late"),
        key_field="sensor_id",
        results_retention_ms=settings.results_retention_ms,
        formatter=as_count,
    )


def as_count(result: WindowResult) -> dict[str, Any]:
    """The seeds' ``(id, window_end, count, "first" | "update")``."""
    return {
        "sensor_id": result.key,
        "window_start_ms": result.window.start_ms,
        "window_end_ms": result.window.end_ms,
        "count": result.value,
        "timing": result.timing,
    }
