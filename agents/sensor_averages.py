"""Average, min and max temperature per sensor per event-time window.

The simplest event-time pipeline: readings keyed by sensor, 5 s tumbling
windows, a watermark 1 s behind the newest reading. A window emits exactly one
result when the watermark passes its end; readings too late for it go to
``late-readings``; records that are not readings go to the dead-letter topic.
"""

from __future__ import annotations

from eddy import BoundedOutOfOrderness, Stats, Tumbling
from eddy.examples.app import app
from eddy.examples.settings import SensorSettings
from eddy.examples.topics import AVERAGES, LATE_READINGS, readings


@app.define(settings=SensorSettings)
def sensor_averages(s: SensorSettings) -> None:
    (
        app.stream(readings(s), watermark=BoundedOutOfOrderness(bound_ms=s.watermark_bound_ms))
        .window(Tumbling(size_ms=s.window_size_ms), allowed_lateness_ms=s.allowed_lateness_ms)
        .late_to(LATE_READINGS)
        .aggregate(Stats("temperature"))
        .to(AVERAGES)
        .queryable()
    )


app.alias("/sensors/{key}/windows", "/agents/sensor_averages/windows/{key}")
