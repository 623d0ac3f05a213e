"""Sensor process functions (docs/semantics.md, "Process functions", "Timers",
"Broadcast state"), written against Eddy's process-function API. Pipelines in this package run them;
the unit tests run them in the harness.

Readings are dicts ``{"sensor_id", "timestamp_ms", "temperature"}`` (Fahrenheit).
"""

from __future__ import annotations

from typing import Any

from eddy import BroadcastContext, Context

FREEZING_F = 32.0
ONE_HOUR_MS = 3_600_000


class TempIncreaseAlert:
    """Alert when a sensor's temperature rose monotonically for 1 s of
    processing time. A drop deletes the pending timer."""

    def __init__(self, interval_ms: int = 1_000) -> None:
        self.interval_ms = interval_ms

    def process_element(self, reading: dict[str, Any], ctx: Context) -> None:
        last_temp = ctx.state.value("last_temp")
        timer = ctx.state.value("timer")
        previous = last_temp.get()
        last_temp.set(reading["temperature"])
        current_timer = timer.get()
        if previous is None or reading["temperature"] < previous:
            if current_timer is not None:
                ctx.timer_service.delete_processing_time_timer(current_timer)
            timer.clear()
        elif reading["temperature"] > previous and current_timer is None:
            at = ctx.timer_service.current_processing_time_ms + self.interval_ms
            ctx.timer_service.register_processing_time_timer(at)
            timer.set(at)

    def on_timer(self, timestamp_ms: int, ctx: Context) -> None:
        ctx.output(
            f"Temperature of sensor '{ctx.key}' monotonically increased for "
            f"{self.interval_ms / 1000:g} second{'s' if self.interval_ms != 1000 else ''}."
        )
        ctx.state.value("timer").clear()


class FreezingMonitor:
    """Every reading to the main output; below 32 F also an alarm to the
    ``freezing-alarms`` side output."""

    def process_element(self, reading: dict[str, Any], ctx: Context) -> None:
        if reading["temperature"] < FREEZING_F:
            ctx.output(f"Freezing Alarm for {reading['sensor_id']}", output="freezing-alarms")
        ctx.output(reading)


class ReadingFilter:
    """Readings connected with switches ``(sensor_id, duration_ms)``; a switch
    forwards its sensor's readings until a processing-time timer turns it off."""

    def process_element1(self, reading: dict[str, Any], ctx: Context) -> None:
        if ctx.state.value("forwarding").get(False):
            ctx.output(reading)

    def process_element2(self, switch: dict[str, Any], ctx: Context) -> None:
        ctx.state.value("forwarding").set(True)
        timer = ctx.state.value("timer")
        until = ctx.timer_service.current_processing_time_ms + switch["duration_ms"]
        current = timer.get()
        if current is None or until > current:
            if current is not None:
                ctx.timer_service.delete_processing_time_timer(current)
            ctx.timer_service.register_processing_time_timer(until)
            timer.set(until)

    def on_timer(self, timestamp_ms: int, ctx: Context) -> None:
        ctx.state.value("forwarding").clear()
        ctx.state.value("timer").clear()


class UpdatableTemperatureAlert:
    """Thresholds per sensor arrive on a broadcast stream (``0.0`` removes
    one); only sensors with a threshold alert on a change larger than it."""

    def process_broadcast_element(self, update: dict[str, Any], ctx: BroadcastContext) -> None:
        thresholds = ctx.broadcast_state("thresholds")
        if update["threshold"] != 0.0:
            thresholds[update["sensor_id"]] = update["threshold"]
        else:
            thresholds.pop(update["sensor_id"], None)
        ctx.save_broadcast("thresholds", thresholds)

    def process_element(self, reading: dict[str, Any], ctx: Context) -> None:
        thresholds = ctx.broadcast("thresholds")
        last_temp = ctx.state.value("last_temp")
        if reading["sensor_id"] in thresholds and last_temp.get() is not None:
            diff = abs(reading["temperature"] - last_temp.get())
            if diff > thresholds[reading["sensor_id"]]:
                ctx.output(
                    {
                        "sensor_id": reading["sensor_id"],
                        "temperature": reading["temperature"],
                        "diff": diff,
                    }
                )
        last_temp.set(reading["temperature"])


class SelfCleaningTemperatureAlert:
    """Alert on a change larger than ``threshold``; an event-time timer
    one hour after a sensor's last reading clears its state, so state does not
    grow with sensors that went away."""

    def __init__(self, threshold: float = 1.7, clean_after_ms: int = ONE_HOUR_MS) -> None:
        self.threshold = threshold
        self.clean_after_ms = clean_after_ms

    def process_element(self, reading: dict[str, Any], ctx: Context) -> None:
        assert ctx.timestamp_ms is not None
        last_timer = ctx.state.value("last_timer")
        new_timer = ctx.timestamp_ms + self.clean_after_ms
        current = last_timer.get()
        if current is not None:
            ctx.timer_service.delete_event_time_timer(current)
        ctx.timer_service.register_event_time_timer(new_timer)
        last_timer.set(new_timer)
        last_temp = ctx.state.value("last_temp")
        previous = last_temp.get()
        if previous is not None:
            diff = abs(reading["temperature"] - previous)
            if diff > self.threshold:
                ctx.output(
                    {
                        "sensor_id": reading["sensor_id"],
                        "temperature": reading["temperature"],
                        "diff": diff,
                    }
                )
        last_temp.set(reading["temperature"])

    def on_timer(self, timestamp_ms: int, ctx: Context) -> None:
        ctx.state.value("last_temp").clear()
        ctx.state.value("last_timer").clear()
