"""``MinMaxTemp``: lowest and highest temperature per sensor per 5 s window,
computed incrementally, with a process-window function that adds the window's
end (docs/semantics.md, "Window functions").
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from eddy import BoundedOutOfOrderness, MinMax, MinMaxResult, Tumbling, WindowContext
from eddy.examples.app import app
from eddy.examples.settings import SensorSettings
from eddy.examples.topics import MINMAX, readings


class MinMaxTemp(BaseModel):
    min: float
    max: float
    end_ts: int


class AddWindowEnd:
    """Incremental min/max in, ``MinMaxTemp(min, max, end_ts)`` out."""

    def process(self, elements: Sequence[MinMaxResult], ctx: WindowContext) -> list[MinMaxTemp]:
        (low_high,) = elements
        return [MinMaxTemp(**low_high, end_ts=ctx.window.end_ms)]


@app.define(settings=SensorSettings)
def sensor_minmax(s: SensorSettings) -> None:
    (
        app.stream(readings(s), watermark=BoundedOutOfOrderness(bound_ms=s.watermark_bound_ms))
        .window(Tumbling(size_ms=s.window_size_ms))
        .aggregate(MinMax("temperature"), process=AddWindowEnd())
        .to(MINMAX)
        .queryable()
    )


app.alias("/sensors/{key}/minmax", "/agents/sensor_minmax/windows/{key}")
