"""Sensor alerts (the seeds' E5, E6, E14, E15 in one keyed function).

Per sensor, in one keyed process function with a broadcast input:

* ``rising``: the temperature rose monotonically for 1 s of processing time
  (a processing-time timer, deleted when the temperature drops);
* ``freezing``: a reading below 32 F, sent as a named side output;
* ``threshold``: the change since the sensor's last reading exceeds the
  threshold set for it on the ``sensor-thresholds`` control topic (broadcast
  state, read-only here; a threshold of 0.0 removes it);
* all of a sensor's state is cleared 1 h (event time) after its last reading,
  so sensors that go away do not leak state.

The latest alerts per sensor stay in state for ``GET /sensors/{id}/alerts``.
"""

from __future__ import annotations

from typing import Any

from service.eventtime import BoundedOutOfOrderness
from service.eventtime.process import BroadcastContext, Context
from service.pipeline.keyed import Input, KeyedProcess
from service.records import SensorReading, ThresholdUpdate
from service.settings import Settings
from tables.schema import StateSchema

NAME = "sensor_alerts"
FREEZING_F = 32.0
RISE_MS = 1_000
CLEAN_AFTER_MS = 3_600_000
RECENT = 20


# Found by name when resuming from a savepoint (docs/savepoints.md).
STATES = {
    name: StateSchema()
    for name in ("last_temp", "rise_timer", "clean_timer", "recent", "broadcast.thresholds")
}


class SensorAlerts:
    def process_broadcast_element(self, update: dict[str, Any], ctx: BroadcastContext) -> None:
        thresholds = ctx.broadcast_state("thresholds")
        if update["threshold"] != 0.0:
            thresholds[update["sensor_id"]] = update["threshold"]
        else:
            thresholds.pop(update["sensor_id"], None)
        ctx.save_broadcast("thresholds", thresholds)

    def process_element(self, reading: dict[str, Any], ctx: Context) -> None:
        temperature = reading["temperature"]
        last_temp = ctx.state.value("last_temp")
        previous = last_temp.get()
        last_temp.set(temperature)
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
            pending = ctx.state.value("rise_timer").get()
            if pending is not None:
                ctx.timer_service.delete_processing_time_timer(pending)
            for name in ("last_temp", "rise_timer", "clean_timer", "recent"):
                ctx.state.value(name).clear()
            return
        ctx.state.value("rise_timer").clear()
        message = f"Temperature of sensor '{ctx.key}' monotonically increased for 1 second."
        self._alert(ctx, "rising", message, None)

    def _watch_rise(self, ctx: Context, previous: float | None, temperature: float) -> None:
        timer = ctx.state.value("rise_timer")
        pending = timer.get()
        if previous is None or temperature < previous:
            if pending is not None:
                ctx.timer_service.delete_processing_time_timer(pending)
            timer.clear()
        elif temperature > previous and pending is None:
            at = ctx.timer_service.current_processing_time_ms + RISE_MS
            ctx.timer_service.register_processing_time_timer(at)
            timer.set(at)

    def _expire_later(self, ctx: Context) -> None:
        assert ctx.timestamp_ms is not None
        clean = ctx.state.value("clean_timer")
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
        reading: dict[str, Any] | None,
        output: str = "main",
        **extra: Any,
    ) -> None:
        alert = {"sensor_id": ctx.key, "kind": kind, "message": message, **extra}
        if reading is not None:
            alert["timestamp_ms"] = reading["timestamp_ms"]
            alert["temperature"] = reading["temperature"]
        ctx.output(alert, output=output)
        recent = ctx.state.value("recent")
        recent.set([*(recent.get() or [])[-(RECENT - 1) :], alert])


def build(settings: Settings) -> KeyedProcess:
    alerts = settings.topic("sensor-alerts")
    return KeyedProcess(
        name=NAME,
        inputs=[
            Input(
                settings.readings_topic,
                SensorReading,
                key=lambda r: r.sensor_id,
                timestamp_ms=lambda r: r.timestamp_ms,
            )
        ],
        function=SensorAlerts(),
        states=STATES,
        # Freezing alarms are a side output; here they share the alerts topic.
        outputs={"main": alerts, "freezing": alerts},
        watermark=BoundedOutOfOrderness(bound_ms=settings.watermark_bound_ms),
        broadcast=Input(
            settings.topic("sensor-thresholds"), ThresholdUpdate, key=lambda u: u.sensor_id
        ),
    )
