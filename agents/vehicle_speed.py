"""Vehicle speed check (seed 002's production project, E20).

Two streams of the same vehicles: the car's OBD device (3 records per second, all
with the same timestamp) and the driver's phone app, which uploads late. In event
time, with a 30 s watermark delay for OBD and minutes for the app (the clock is
the minimum of the two), 1 s tumbling windows per vehicle collapse duplicates and
co-group both sides: a second with both speeds becomes a check, whether the app's
speed agrees with the device's within a tolerance. The last 100 checks per
vehicle stay in state as a rolling agreement rate for REST.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from service.eventtime import BoundedOutOfOrderness, Tumbling, WindowContext, WindowSpec
from service.eventtime.joins import LEFT, RIGHT
from service.eventtime.watermarks import PerInput
from service.pipeline.keyed import Input
from service.pipeline.windowed import WindowJoin
from service.records import VehicleSpeed
from service.settings import Settings

NAME = "vehicle_speed"
OBD_DELAY_MS = 30_000
APP_DELAY_MS = 180_000
ROLLING = 100


class SpeedCheck:
    """One second of one vehicle: both sides' readings, collapsed and compared."""

    def __init__(self, tolerance_kmh: float) -> None:
        self.tolerance_kmh = tolerance_kmh

    def process(self, elements: Sequence[Any], ctx: WindowContext) -> list[Any]:
        obd = [e["value"]["speed_kmh"] for e in elements if e["side"] == LEFT]
        app = [e["value"]["speed_kmh"] for e in elements if e["side"] == RIGHT]
        if not obd or not app:
            return []  # an inner join: a second needs both speeds
        # The device repeats itself three times a second; the app may send twice.
        obd_kmh, app_kmh = sum(obd) / len(obd), sum(app) / len(app)
        diff = round(app_kmh - obd_kmh, 3)
        agrees = abs(diff) <= self.tolerance_kmh
        history = ctx.global_state.setdefault("recent", [])
        history.append(agrees)
        del history[:-ROLLING]
        ctx.global_state["checks"] = ctx.global_state.get("checks", 0) + 1
        ctx.global_state["agreements"] = ctx.global_state.get("agreements", 0) + int(agrees)
        return [
            {
                "second_ms": ctx.window.start_ms,
                "obd_speed_kmh": round(obd_kmh, 3),
                "app_speed_kmh": round(app_kmh, 3),
                "diff_kmh": diff,
                "within_tolerance": agrees,
                "rolling_agreement": round(sum(history) / len(history), 4),
            }
        ]


def build(settings: Settings) -> WindowJoin:
    obd, app = settings.topic("vehicle-obd-speed"), settings.topic("vehicle-app-speed")
    return WindowJoin(
        name=NAME,
        left=Input(
            obd, VehicleSpeed, key=lambda v: v.vehicle_id, timestamp_ms=lambda v: v.timestamp_ms
        ),
        right=Input(
            app, VehicleSpeed, key=lambda v: v.vehicle_id, timestamp_ms=lambda v: v.timestamp_ms
        ),
        watermark=PerInput(
            {obd: BoundedOutOfOrderness(OBD_DELAY_MS), app: BoundedOutOfOrderness(APP_DELAY_MS)}
        ),
        window=WindowSpec(Tumbling(1_000), process=SpeedCheck(settings.speed_tolerance_kmh)),
        sink=settings.topic("vehicle-speed-checks"),
        key_field="vehicle_id",
        results_retention_ms=settings.results_retention_ms,
    )
