"""Process functions, timers, keyed state and broadcast state (docs/semantics.md,
"Process functions", "Timers", "Keyed state" and "Broadcast state"), on the
reference app's sensor functions (``agents/sensor_functions.py``): rising
temperature, freezing, updatable and self-cleaning alerts, a reading filter."""

from __future__ import annotations

from typing import Any

import pytest

from eddy.eventtime import BoundedOutOfOrderness
from eddy.eventtime.harness import ProcessHarness
from eddy.examples.sensor_functions import (
    FreezingMonitor,
    ReadingFilter,
    SelfCleaningTemperatureAlert,
    TempIncreaseAlert,
    UpdatableTemperatureAlert,
)


def reading(sensor: str, temperature: float, ts: int = 0) -> dict[str, Any]:
    return {"sensor_id": sensor, "timestamp_ms": ts, "temperature": temperature}


def by_sensor(r: dict[str, Any]) -> str:
    return str(r["sensor_id"])


def test_rising_for_one_second_alerts_once() -> None:
    h = ProcessHarness(TempIncreaseAlert(), key=by_sensor, processing_time_ms=10_000)
    h.record(reading("s1", 70.0))
    h.processing_time(10_300)
    h.record(reading("s1", 71.0))  # rising: a timer for 11_300
    h.processing_time(10_900)
    h.record(reading("s1", 72.0))  # still rising: the same timer
    h.processing_time(11_299)
    assert h.output() == []
    h.processing_time(11_300)
    assert h.output() == ["Temperature of sensor 's1' monotonically increased for 1 second."]


def test_a_drop_deletes_the_pending_timer() -> None:
    h = ProcessHarness(TempIncreaseAlert(), key=by_sensor, processing_time_ms=0)
    h.record(reading("s1", 70.0))
    h.record(reading("s1", 71.0))  # timer at 1_000
    h.processing_time(500)
    h.record(reading("s1", 69.0))  # drop: timer deleted
    h.processing_time(5_000)
    assert h.output() == []
    assert h.processing_timers.timers == set()


def test_keys_have_their_own_timers() -> None:
    h = ProcessHarness(TempIncreaseAlert(), key=by_sensor)
    h.record(reading("a", 1.0))
    h.record(reading("b", 1.0))
    h.record(reading("a", 2.0))  # only a rises
    h.processing_time(2_000)
    assert h.output() == ["Temperature of sensor 'a' monotonically increased for 1 second."]


def test_freezing_readings_also_raise_a_side_output_alarm() -> None:
    h = ProcessHarness(FreezingMonitor(), key=by_sensor)
    for temp in (40.0, 31.9, 32.0, 10.0):
        h.record(reading("s7", temp))
    assert [r["temperature"] for r in h.output()] == [40.0, 31.9, 32.0, 10.0]
    assert h.output("freezing-alarms") == ["Freezing Alarm for s7", "Freezing Alarm for s7"]


def test_switches_forward_a_sensors_readings_until_their_timer() -> None:
    h = ProcessHarness(
        ReadingFilter(),
        key=[by_sensor, lambda s: s["sensor_id"]],
        inputs=("readings", "switches"),
        processing_time_ms=0,
    )
    h.record(reading("sensor_2", 1.0), "readings")  # no switch yet: filtered
    h.record({"sensor_id": "sensor_2", "duration_ms": 10_000}, "switches")
    h.record({"sensor_id": "sensor_7", "duration_ms": 60_000}, "switches")
    h.record(reading("sensor_2", 2.0), "readings")
    h.record(reading("sensor_7", 3.0), "readings")
    h.record(reading("sensor_9", 4.0), "readings")
    h.processing_time(10_000)  # sensor_2's switch turns off
    h.record(reading("sensor_2", 5.0), "readings")
    h.record(reading("sensor_7", 6.0), "readings")
    assert [r["temperature"] for r in h.output()] == [2.0, 3.0, 6.0]


def test_broadcast_thresholds_only_alert_sensors_that_have_one() -> None:
    h = ProcessHarness(UpdatableTemperatureAlert(), key=by_sensor)
    h.record(reading("s1", 70.0))
    h.record(reading("s1", 75.0))  # no threshold yet: no alert
    h.broadcast({"sensor_id": "s1", "threshold": 2.0})
    h.record(reading("s1", 76.0))  # +1.0: under the threshold
    h.record(reading("s1", 80.0))  # +4.0: alert
    h.broadcast({"sensor_id": "s1", "threshold": 0.0})  # 0.0 removes it
    h.record(reading("s1", 90.0))
    assert h.output() == [{"sensor_id": "s1", "temperature": 80.0, "diff": 4.0}]


def test_broadcast_state_is_read_only_on_the_data_side() -> None:
    class Meddler:
        def process_broadcast_element(self, update: dict[str, Any], ctx: Any) -> None:
            ctx.save_broadcast("t", {"x": 1})

        def process_element(self, value: Any, ctx: Any) -> None:
            ctx.broadcast("t")["x"] = 99  # changes a copy only
            ctx.output(ctx.broadcast("t"))

    h = ProcessHarness(Meddler(), key=lambda v: "k")
    h.broadcast({})
    h.record({})
    h.record({})
    assert h.output() == [{"x": 1}, {"x": 1}]


def test_the_self_cleaning_alert_forgets_a_sensor_an_hour_after_its_last_reading() -> None:
    h = ProcessHarness(
        SelfCleaningTemperatureAlert(threshold=1.7),
        key=by_sensor,
        timestamp_ms=lambda r: r["timestamp_ms"],
        watermark=BoundedOutOfOrderness(0),
    )
    h.record(reading("s1", 70.0, ts=0))
    h.record(reading("s1", 72.0, ts=1_000))  # +2.0 > 1.7: alert
    h.record(reading("s2", 50.0, ts=2_000))
    h.record(reading("s1", 72.5, ts=1_800_000))  # moves s1's cleanup timer to 1.5 h
    assert h.output() == [{"sensor_id": "s1", "temperature": 72.0, "diff": 2.0}]
    h.watermark(3_602_000)  # s2's hour is over, s1's is not
    assert not any(key == "s2" for _, key in h.backend.values)
    assert any(key == "s1" for _, key in h.backend.values)
    h.watermark(5_400_000)
    assert h.backend.values == {}
    assert h.event_timers.timers == set()


def test_processing_timers_due_while_down_fire_after_a_restore() -> None:
    first = ProcessHarness(TempIncreaseAlert(), key=by_sensor, processing_time_ms=0)
    first.record(reading("s1", 1.0))
    first.record(reading("s1", 2.0))  # timer at 1_000
    # The worker stops at 500 and is back at 60_000: the state (and its timers) survive.
    second = ProcessHarness(TempIncreaseAlert(), key=by_sensor, processing_time_ms=0)
    second.backend.values = first.backend.values
    second.processing_timers.timers = set(first.processing_timers.timers)
    second.operator.reload(None)
    second.processing_time(60_000)
    assert second.output() == ["Temperature of sensor 's1' monotonically increased for 1 second."]


def test_deleting_a_timer_that_does_not_exist_is_a_no_op() -> None:
    class Deleter:
        def process_element(self, value: Any, ctx: Any) -> None:
            ctx.timer_service.delete_event_time_timer(123)
            ctx.timer_service.delete_processing_time_timer(456)
            ctx.output("ok")

    h = ProcessHarness(Deleter(), key=lambda v: "k")
    h.record({})
    assert h.output() == ["ok"]


def test_event_timers_fire_in_timestamp_order_across_keys() -> None:
    class Later:
        def process_element(self, value: Any, ctx: Any) -> None:
            ctx.timer_service.register_event_time_timer(value["at"])

        def on_timer(self, timestamp_ms: int, ctx: Any) -> None:
            ctx.output((ctx.key, timestamp_ms))

    h = ProcessHarness(Later(), key=lambda v: v["k"], timestamp_ms=lambda v: 0)
    for k, at in (("a", 30), ("b", 10), ("c", 20), ("a", 5)):
        h.record({"k": k, "at": at})
    h.watermark(25)
    assert h.output() == [("a", 5), ("b", 10), ("c", 20)]
    h.watermark(29)
    h.watermark(30)  # a timer fires when the watermark reaches it, not before
    assert h.output()[-1] == ("a", 30)


@pytest.mark.parametrize("kind", ["value", "list", "map", "reducing", "aggregating"])
def test_every_state_kind_is_scoped_to_the_current_key(kind: str) -> None:
    from eddy.eventtime import Count

    class Writer:
        def process_element(self, value: Any, ctx: Any) -> None:
            states = {
                "value": lambda: ctx.state.value("s"),
                "list": lambda: ctx.state.list("s"),
                "map": lambda: ctx.state.map("s"),
                "reducing": lambda: ctx.state.reducing("s", lambda a, b: a + b),
                "aggregating": lambda: ctx.state.aggregating("s", Count()),
            }
            state = states[kind]()
            if kind == "value":
                state.set(state.get(0) + value["n"])
            elif kind == "list":
                state.add(value["n"])
            elif kind == "map":
                state.put(str(value["n"]), value["n"])
            else:
                state.add(value["n"])
            result = state.get() if kind != "map" else dict(state.items())
            ctx.output(result)

    h = ProcessHarness(Writer(), key=lambda v: v["k"])
    for k, n in (("a", 1), ("b", 10), ("a", 2)):
        h.record({"k": k, "n": n})
    expected = {
        "value": [1, 10, 3],
        "list": [[1], [10], [1, 2]],
        "map": [{"1": 1}, {"10": 10}, {"1": 1, "2": 2}],
        "reducing": [1, 10, 3],
        "aggregating": [1, 1, 2],
    }
    assert h.output() == expected[kind]
