"""The clock an agent runs on, as a user sees it in the test driver: a
punctuated watermark reads each record; count windows need no watermark; a
joined pair carries the later of its two times; each join side goes idle on its
own timeout."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from eddy import (
    App,
    BoundedOutOfOrderness,
    Count,
    Punctuated,
    TestDriver,
    Topic,
    Tumbling,
)


class Reading(BaseModel):
    sensor: str
    ts_ms: int
    done_until_ms: int | None = None  # a marker: nothing older will come


readings = Topic("readings", Reading, key="sensor", timestamp="ts_ms")


def _marker(value: Any, timestamp_ms: int) -> int | None:
    return None if value.done_until_ms is None else value.done_until_ms


def test_a_punctuated_watermark_closes_a_window_when_a_marker_record_says_so() -> None:
    app = App("clocks")
    counts = Topic("counts", dict, key="sensor")
    (
        app.stream(readings, name="counted", watermark=Punctuated(_marker))
        .window(Tumbling(size_ms=1_000))
        .aggregate(Count())
        .to(counts)
    )
    with TestDriver(app) as driver:
        driver.send(readings, Reading(sensor="a", ts_ms=100))
        driver.send(readings, Reading(sensor="a", ts_ms=5_000))
        assert driver.read(counts) == []  # timestamps alone do not move this clock
        driver.send(readings, Reading(sensor="a", ts_ms=5_001, done_until_ms=999))
        assert [(o.value["window_start_ms"], o.value["value"]) for o in driver.read(counts)] == [
            (0, 1)
        ]


def test_count_windows_run_without_a_watermark() -> None:
    app = App("clocks")
    pairs = Topic("pairs", dict, key="sensor")
    app.stream(readings, name="paired").count_window(2).aggregate(Count()).to(pairs)
    with TestDriver(app) as driver:
        for ts_ms in (10, 5, 1):
            driver.send(readings, Reading(sensor="a", ts_ms=ts_ms))
        assert [o.value["value"] for o in driver.read(pairs)] == [2]


class Order(BaseModel):
    user: str
    ts_ms: int


orders = Topic("orders", Order, key="user", timestamp="ts_ms")
payments = Topic("payments", Order, key="user", timestamp="ts_ms")


def _joined_app(idle_timeout_ms: int | None) -> tuple[App, Topic[Any]]:
    app = App("clocks")
    paid = Topic("paid", dict, key="user")
    left = app.stream(orders, watermark=BoundedOutOfOrderness(0), name="paid_orders")
    right = app.stream(
        payments, watermark=BoundedOutOfOrderness(0, idle_timeout_ms=idle_timeout_ms)
    )
    left.interval_join(
        right,
        lower_ms=0,
        upper_ms=1_000,
        join=lambda o, p: {"user": o.user, "order_ms": o.ts_ms, "paid_ms": p.ts_ms},
    ).to(paid)
    return app, paid


def test_a_joined_pair_carries_the_later_of_its_two_times() -> None:
    app, paid = _joined_app(None)
    with TestDriver(app) as driver:
        driver.send(payments, Order(user="ann", ts_ms=1_500))
        driver.send(orders, Order(user="ann", ts_ms=1_000))
        (pair,) = driver.read(paid)
        assert pair.value == {"user": "ann", "order_ms": 1_000, "paid_ms": 1_500}
        assert pair.timestamp_ms == 1_500


def test_only_the_side_with_an_idle_timeout_goes_idle() -> None:
    # Payments idle after 5 s: orders alone then move the clock, so the join
    # forgets old orders. With no timeout on payments, the clock waits for them.
    for idle_ms, expect_expired in ((5_000, True), (None, False)):
        app, paid = _joined_app(idle_ms)
        with TestDriver(app) as driver:
            driver.send(payments, Order(user="bob", ts_ms=0))
            driver.send(orders, Order(user="ann", ts_ms=1_000))
            driver.advance_time(10_000)
            driver.send(orders, Order(user="ann", ts_ms=60_000))
            driver.send(payments, Order(user="ann", ts_ms=1_500))
            matched = [o.value["order_ms"] for o in driver.read(paid)]
            assert (matched == []) is expect_expired, (idle_ms, matched)
