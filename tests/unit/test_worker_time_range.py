"""The worker's side of the event-time range: a record whose time is outside
-2^53..2^53 ms is dead-lettered, naming the bound, and the bounds themselves are
times (the replay refuses such input lines: tests/unit/test_replay_edges.py).

The test driver hands its records to the worker's own reading code
(``eddy.pipeline.source.Source``), so what it does here is what a worker does;
both ways a stage reads a time are covered: a field of the value, and the Kafka
timestamp.
"""

from __future__ import annotations

import json

import pytest

from eddy import App, BoundedOutOfOrderness, Count, TestDriver, Topic, Tumbling

LIMIT = 2**53
OUTSIDE = {
    "2^53+1": LIMIT + 1,
    "-2^53-1": -LIMIT - 1,
    "near 2^63": 9_223_372_036_854_775_000,
    "min int64": -(2**63),
}
INSIDE = {"-2^53": -LIMIT, "2^53": LIMIT}
SIZE_MS = 60_000

by_field = Topic("timed", key="id", timestamp="ts_ms")  # the time is a field
by_kafka = Topic("stamped", key="id")  # the time is the Kafka timestamp
passed_field, passed_kafka, counts = Topic("passed-field"), Topic("passed-kafka"), Topic("counts")


def _app() -> App:
    app = App("time-range")
    app.stream(by_field, name="field_pass").to(passed_field)
    app.stream(by_kafka, name="kafka_pass").to(passed_kafka)
    (
        app.stream(by_field, name="field_counts", watermark=BoundedOutOfOrderness(bound_ms=0))
        .window(Tumbling(size_ms=SIZE_MS))
        .aggregate(Count())
        .to(counts)
    )
    return app


def _dead_by_id(driver: TestDriver) -> dict[tuple[str, str], str]:
    """(agent, record id) -> reason, for every dead letter (none twice)."""
    found: dict[tuple[str, str], str] = {}
    for dead in driver.dead_letters():
        headers = {name: value.decode() for name, value in dead.headers}
        assert dead.value is not None
        where = (headers["eddy.pipeline"], json.loads(dead.value)["id"])
        assert where not in found, f"{where} dead-lettered twice"
        assert dead.reason is not None
        found[where] = dead.reason
    return found


def test_times_outside_2_to_the_53_are_dead_lettered_and_the_bounds_are_processed() -> None:
    times = {**OUTSIDE, **INSIDE}  # the bad ones first: they must not move any clock
    with TestDriver(_app()) as driver:
        for name, time_ms in times.items():
            driver.send(by_field, {"id": name, "ts_ms": time_ms})
            driver.send(by_kafka, {"id": name}, timestamp_ms=time_ms)
        driver.end_of_input()

        dead = _dead_by_id(driver)
        expected: dict[tuple[str, str], str] = {}
        for name, time_ms in OUTSIDE.items():
            reason = f"{time_ms} ms is outside -2^53..2^53 ms (not a real time)"
            expected[("field_pass", name)] = f"timestamp: {reason}"
            expected[("field_counts", name)] = f"timestamp: {reason}"
            expected[("kafka_pass", name)] = f"Kafka timestamp: {reason}"
        assert dead == expected

        # The in-range ones, every one of them, each with its time, and nothing else.
        field = [(o.key, o.value, o.timestamp_ms) for o in driver.read(passed_field)]
        assert field == [(n, {"id": n, "ts_ms": t}, t) for n, t in INSIDE.items()]
        kafka = [(o.key, o.value, o.timestamp_ms) for o in driver.read(passed_kafka)]
        assert kafka == [(n, {"id": n}, t) for n, t in INSIDE.items()]
        # A window at each bound, one record each: the bounds are event times too.
        windows = sorted(
            (o.key, o.value["window_start_ms"], o.value["value"]) for o in driver.read(counts)
        )
        assert windows == sorted((n, t - t % SIZE_MS, 1) for n, t in INSIDE.items())


@pytest.mark.parametrize("name", sorted(OUTSIDE))
def test_a_time_outside_the_range_moves_no_clock(name: str) -> None:
    """A dead-lettered time is not an event time: a window still open before it
    stays open, as if the record had never come."""
    with TestDriver(_app(), agents=["field_counts"]) as driver:
        driver.send(by_field, {"id": "a", "ts_ms": 1_000})
        driver.send(by_field, {"id": "a", "ts_ms": OUTSIDE[name]})
        assert driver.read(counts) == []
        assert [d.reason for d in driver.dead_letters()] == [
            f"timestamp: {OUTSIDE[name]} ms is outside -2^53..2^53 ms (not a real time)"
        ]
        driver.send(by_field, {"id": "a", "ts_ms": 2_000})  # still in the open window
        driver.end_of_input()
        assert [o.value["value"] for o in driver.read(counts)] == [2]
