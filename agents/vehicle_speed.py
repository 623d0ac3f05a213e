"""Vehicle speed check: two streams of the same vehicles joined per second.

The car's OBD device sends 3 records per second, all with the same timestamp;
the driver's phone app uploads late. In event time, with a 30 s watermark delay
for OBD and minutes for the app (the join's clock is the minimum of the two),
1 s tumbling windows per vehicle collapse duplicates and co-group both sides: a
second with both speeds becomes a check, whether the app's speed agrees with the
device's within a tolerance, with the vehicle's rolling agreement over its last
100 checks.
"""

from __future__ import annotations

from pydantic import BaseModel

from eddy import BoundedOutOfOrderness, Tumbling, WindowContext
from eddy.examples.app import app
from eddy.examples.records import VehicleSpeed
from eddy.examples.settings import VehicleSettings
from eddy.examples.topics import APP_SPEED, OBD_SPEED, SPEED_CHECKS

OBD_DELAY_MS = 30_000
APP_DELAY_MS = 180_000
ROLLING = 100


class SpeedCheck(BaseModel):
    vehicle_id: str
    second_ms: int
    obd_speed_kmh: float
    app_speed_kmh: float
    diff_kmh: float
    within_tolerance: bool
    rolling_agreement: float


class Checker:
    """One second of one vehicle: both sides' readings, collapsed and compared."""

    def __init__(self, tolerance_kmh: float) -> None:
        self.tolerance_kmh = tolerance_kmh

    def __call__(
        self, obd: list[VehicleSpeed], phone: list[VehicleSpeed], ctx: WindowContext
    ) -> SpeedCheck | None:
        if not obd or not phone:
            return None  # an inner join: a second needs both speeds
        # The device repeats itself three times a second; the app may send twice.
        obd_kmh = sum(v.speed_kmh for v in obd) / len(obd)
        app_kmh = sum(v.speed_kmh for v in phone) / len(phone)
        diff = round(app_kmh - obd_kmh, 3)
        agrees = abs(diff) <= self.tolerance_kmh
        history = ctx.global_state.setdefault("recent", [])
        history.append(agrees)
        del history[:-ROLLING]
        return SpeedCheck(
            vehicle_id=ctx.key,
            second_ms=ctx.window.start_ms,
            obd_speed_kmh=round(obd_kmh, 3),
            app_speed_kmh=round(app_kmh, 3),
            diff_kmh=diff,
            within_tolerance=agrees,
            rolling_agreement=round(sum(history) / len(history), 4),
        )


@app.define(settings=VehicleSettings)
def vehicle_speed(s: VehicleSettings) -> None:
    obd = app.stream(OBD_SPEED, watermark=BoundedOutOfOrderness(bound_ms=OBD_DELAY_MS))
    phone = app.stream(APP_SPEED, watermark=BoundedOutOfOrderness(bound_ms=APP_DELAY_MS))
    (
        obd.window_join(phone, Tumbling(size_ms=1_000), cogroup=Checker(s.speed_tolerance_kmh))
        .to(SPEED_CHECKS)
        .queryable()
    )


app.alias("/vehicles/{key}/checks", "/agents/vehicle_speed/windows/{key}")
