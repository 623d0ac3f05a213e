"""Sensor alerts: the rules of agents/sensor_functions.py (rising, freezing,
threshold, self-cleaning state) in one keyed function with a broadcast input.

Per sensor:

* ``rising``: the temperature rose monotonically for 1 s of processing time
  (a processing-time timer, deleted when the temperature drops);
* ``freezing``: a reading below 32 F, sent as a named side output;
* ``threshold``: the change since the sensor's last reading exceeds the
  threshold set for it on the ``sensor-thresholds`` control topic (broadcast
  state, read-only here; a threshold of 0.0 removes it);
* all of a sensor's state is cleared 1 h (event time) after its last reading,
  so sensors that go away do not leak state.

The latest alerts, the last temperature and the sensor's counts (readings and
alerts by kind since its state began) are queryable. The counts are what an
alert rate is computed from (spark_jobs/sensor_report.py): the latest alerts
alone are capped at 20 per sensor, so a rate over them says nothing.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from eddy import BoundedOutOfOrderness, BroadcastContext, Context, ListState, ValueState
from eddy.examples.app import app
from eddy.examples.records import SensorReading, ThresholdUpdate
from eddy.examples.settings import SensorSettings
from eddy.examples.topics import ALERTS, THRESHOLDS, readings

FREEZING_F = 32.0
RISE_MS = 1_000
CLEAN_AFTER_MS = 3_600_000
RECENT = 20


class Alert(BaseModel):
    sensor_id: str
    kind: str
    message: str
    timestamp_ms: int | None = None
    temperature: float | None = None
    diff: float | None = None
    threshold: float | None = None


class Counts(BaseModel):
    """A sensor's readings and alerts, counted since its state began (its first
    reading, or its first after an hour of silence cleared it)."""

    readings: int = 0
    alerts: dict[str, int] = {}
    since_ms: int | None = None


LAST_TEMP = ValueState("last_temp", float, queryable=True)
RISE_TIMER = ValueState("rise_timer", int)
CLEAN_TIMER = ValueState("clean_timer", int)
RECENT_ALERTS = ListState("recent", Alert, queryable=True)
COUNTS = ValueState("counts", Counts, queryable=True)
STATES = (LAST_TEMP, RISE_TIMER, CLEAN_TIMER, RECENT_ALERTS, COUNTS)


class SensorAlerts:
    def process_broadcast_element(self, update: ThresholdUpdate, ctx: BroadcastContext) -> None:
        thresholds = ctx.broadcast_state("thresholds")
        if update.threshold != 0.0:
            thresholds[update.sensor_id] = update.threshold
        else:
            thresholds.pop(update.sensor_id, None)
        ctx.save_broadcast("thresholds", thresholds)

    def process_element(self, reading: SensorReading, ctx: Context) -> None:
        temperature = reading.temperature
        last_temp = ctx.state(LAST_TEMP)
        previous = last_temp.get()
        last_temp.set(temperature)
        counts = ctx.state(COUNTS)
        now = counts.get() or Counts(since_ms=reading.timestamp_ms)
        counts.set(now.model_copy(update={"readings": now.readings + 1}))
        self._expire_later(ctx)
        if temperature < FREEZING_F:
            self._alert(ctx, "freezing", f"Freezing Alarm for {ctx.key}", reading, "freezing")
        threshold = ctx.broadcast("thresholds").get(ctx.key)
        if threshold is not None and previous is not None:
            # Rounded so 64.25 - 62.42 reads 1.83, not 1.8299999999999983.
            diff = round(abs(temperature - previous), 6)
            if diff > threshold:
                message = f"Temperature of sensor '{ctx.key}' changed by {diff:.2f} F"
                self._alert(ctx, "threshold", message, reading, diff=diff, threshold=threshold)
        self._watch_rise(ctx, previous, temperature)

    def on_timer(self, timestamp_ms: int, ctx: Context) -> None:
        if ctx.time_domain == "event_time":  # an hour without readings: forget the sensor
            pending = ctx.state(RISE_TIMER).get()
            if pending is not None:
                ctx.timer_service.delete_processing_time_timer(pending)
            for state in STATES:
                ctx.state(state).clear()
            return
        ctx.state(RISE_TIMER).clear()
        message = f"Temperature of sensor '{ctx.key}' monotonically increased for 1 second."
        self._alert(ctx, "rising", message, None)

    def _watch_rise(self, ctx: Context, previous: float | None, temperature: float) -> None:
        timer = ctx.state(RISE_TIMER)
        pending = timer.get()
        if previous is None or temperature < previous:
            if pending is not None:
                ctx.timer_service.delete_processing_time_timer(pending)
            timer.clear()
        elif temperature > previous and pending is None:
            at = ctx.processing_time_ms + RISE_MS
            ctx.timer_service.register_processing_time_timer(at)
            timer.set(at)

    def _expire_later(self, ctx: Context) -> None:
        assert ctx.timestamp_ms is not None
        clean = ctx.state(CLEAN_TIMER)
        pending = clean.get()
        if pending is not None:
            ctx.timer_service.delete_event_time_timer(pending)
        at = ctx.timestamp_ms + CLEAN_AFTER_MS
        ctx.timer_service.register_event_time_timer(at)
        clean.set(at)

    def _alert(
        self,
        ctx: Context,
        kind: str,
        message: str,
        reading: SensorReading | None,
        output: str = "main",
        **extra: Any,
    ) -> None:
        alert = Alert(sensor_id=ctx.key, kind=kind, message=message, **extra)
        if reading is not None:
            alert = alert.model_copy(
                update={"timestamp_ms": reading.timestamp_ms, "temperature": reading.temperature}
            )
        ctx.output(alert.model_dump(exclude_none=True), output=output)
        recent = ctx.state(RECENT_ALERTS)
        recent.update([*recent.get()[-(RECENT - 1) :], alert])
        counts = ctx.state(COUNTS)
        now = counts.get() or Counts()
        alerts = {**now.alerts, kind: now.alerts.get(kind, 0) + 1}
        counts.set(now.model_copy(update={"alerts": alerts}))


@app.define(settings=SensorSettings)
def sensor_alerts(s: SensorSettings) -> None:
    (
        app.stream(readings(s), watermark=BoundedOutOfOrderness(bound_ms=s.watermark_bound_ms))
        .connect(app.broadcast(THRESHOLDS))
        .process(SensorAlerts(), states=STATES, side_outputs={"freezing": ALERTS})
        .to(ALERTS)
    )


app.alias("/sensors/{key}/alerts", "/agents/sensor_alerts/state/recent/{key}")
