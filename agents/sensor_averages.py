"""Average, min and max temperature per sensor per event-time window.

The seeds' first example (E1-E4): readings keyed by sensor, 5 s tumbling
windows, a watermark 1 s behind the newest reading. A window emits exactly one
result when the watermark passes its end; readings too late for it go to
``late-readings``; records that are not readings go to ``dead-letters``.
"""

from __future__ import annotations

from service.eventtime import BoundedOutOfOrderness, Stats, Tumbling, WindowSpec
from service.pipeline.windowed import EventTime, WindowedAggregation
from service.records import SensorReading
from service.settings import Settings

NAME = "sensor_averages"


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
            aggregate=Stats(lambda r: r.temperature),
            allowed_lateness_ms=settings.allowed_lateness_ms,
        ),
        sink=settings.averages_topic,
        late_output=settings.late_topic,
        key_field="sensor_id",
        results_retention_ms=settings.results_retention_ms,
    )
