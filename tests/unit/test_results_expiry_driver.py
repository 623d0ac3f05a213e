"""In the test driver, as in the worker: a record stamped days ahead, or the end of
input, leaves every key's queryable results in place; the driver's clock expires
them, and the per-key cap keeps each key's newest windows."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from eddy import App, BoundedOutOfOrderness, ConfigError, Count, TestDriver, Topic, Tumbling

MINUTE_MS = 60_000
DAY_MS = 86_400_000


class Click(BaseModel):
    user: str
    ts_ms: int


def click_app(retention_ms: int | None = None, per_key: int | None = None) -> App:
    app = App("clicks")
    clicks = Topic("clicks", Click, key="user", timestamp="ts_ms")
    (
        app.stream(clicks, name="per_minute", watermark=BoundedOutOfOrderness(bound_ms=0))
        .window(Tumbling(size_ms=MINUTE_MS))
        .aggregate(Count())
        .queryable(retention_ms=retention_ms, per_key=per_key)
    )
    return app


def starts(driver: TestDriver, user: str) -> list[int]:
    return [row["window_start_ms"] for row in driver.windows("per_minute", user)]


def send_minutes(driver: TestDriver, users: str, minutes: range) -> None:
    for minute in minutes:
        for user in users:
            driver.send("clicks", Click(user=user, ts_ms=minute * MINUTE_MS + 1))


def test_a_click_two_days_ahead_leaves_every_other_user_s_windows() -> None:
    with TestDriver(click_app()) as driver:
        send_minutes(driver, "abc", range(5))
        assert starts(driver, "a") == [m * MINUTE_MS for m in range(4)]
        driver.send("clicks", Click(user="z", ts_ms=2 * DAY_MS))
        driver.advance_time(MINUTE_MS)  # checkpoints, with the clock moved on
        for user in "abc":
            assert starts(driver, user) == [m * MINUTE_MS for m in range(5)]


def test_the_end_of_input_leaves_every_window_until_the_driver_s_clock_expires_it() -> None:
    with TestDriver(click_app(retention_ms=10 * MINUTE_MS)) as driver:
        send_minutes(driver, "ab", range(3))
        driver.end_of_input()
        driver.advance_time(10 * MINUTE_MS - 1)
        assert starts(driver, "a") == starts(driver, "b") == [0, MINUTE_MS, 2 * MINUTE_MS]
        driver.advance_time(1)
        assert starts(driver, "a") == starts(driver, "b") == []


def test_the_per_key_cap_keeps_each_user_s_newest_windows() -> None:
    with TestDriver(click_app(per_key=2)) as driver:
        send_minutes(driver, "b", range(1))
        send_minutes(driver, "a", range(6))
        driver.end_of_input()
        assert starts(driver, "a") == [4 * MINUTE_MS, 5 * MINUTE_MS]
        assert starts(driver, "b") == [0]


@pytest.mark.parametrize(
    ("retention_ms", "per_key", "reason"),
    [
        (0, None, r"agent per_minute: \.queryable\(retention_ms=\.\.\.\) must be from 1 to "),
        (None, 0, r"agent per_minute: \.queryable\(per_key=\.\.\.\) must be >= 1 \(got 0\)"),
    ],
)
def test_a_retention_that_keeps_nothing_is_refused_in_one_line(
    retention_ms: int | None, per_key: int | None, reason: str
) -> None:
    with pytest.raises(ConfigError, match=reason):
        TestDriver(click_app(retention_ms=retention_ms, per_key=per_key))
