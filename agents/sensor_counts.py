"""Late data (docs/semantics.md, "Allowed lateness and late data"): readings per
sensor per 10 s window, with 5 s of allowed lateness. A window emits ``first``
when the watermark passes its end, then an ``update`` for each reading arriving
within the lateness; readings later than that go to their own topic.
"""

from __future__ import annotations

from pydantic import BaseModel

from eddy import BoundedOutOfOrderness, Count, Tumbling, WindowResult
from eddy.examples.app import app
from eddy.examples.settings import SensorSettings
from eddy.examples.topics import COUNTS, COUNTS_LATE, readings

WINDOW_MS = 10_000
ALLOWED_LATENESS_MS = 5_000


class SensorCount(BaseModel):
    """A window's count per sensor, marked ``first`` or ``update``."""

    sensor_id: str
    window_start_ms: int
    window_end_ms: int
    count: int
    timing: str


def as_count(result: WindowResult) -> SensorCount:
    return SensorCount(
        sensor_id=result.key,
        window_start_ms=result.window.start_ms,
        window_end_ms=result.window.end_ms,
        count=result.value,
        timing=result.timing,
    )


@app.define(settings=SensorSettings)
def sensor_counts(s: SensorSettings) -> None:
    (
        app.stream(readings(s), watermark=BoundedOutOfOrderness(bound_ms=s.watermark_bound_ms))
        .window(Tumbling(size_ms=WINDOW_MS), allowed_lateness_ms=ALLOWED_LATENESS_MS)
        .late_to(COUNTS_LATE)
        .aggregate(Count())
        .queryable()
        .map(as_count)
        .to(COUNTS)
    )


app.alias("/sensors/{key}/counts", "/agents/sensor_counts/windows/{key}")
