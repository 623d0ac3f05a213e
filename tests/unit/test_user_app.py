"""A user's app, outside the repository, in the test driver: the fluent window and
the same logic as an ``@app.agent`` with a timer give the same results for any
input, including late clicks; and the agent file stays short."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eddy import TestDriver
from tests.support.user_apps import FLUENT, lines_of_code, write_package

MINUTE_MS = 60_000


@pytest.fixture(scope="module")
def user_package(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ModuleType, ModuleType]]:
    root = write_package(tmp_path_factory.mktemp("user"))
    sys.path.insert(0, str(root))
    try:
        yield (
            importlib.import_module("clickstream.app"),
            importlib.import_module("clickstream.timers"),
        )
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m.startswith("clickstream")]:
            del sys.modules[name]


def test_the_fluent_agent_is_a_short_file_of_public_names() -> None:
    assert lines_of_code(FLUENT) <= 25
    imported = [line for line in FLUENT.splitlines() if line.startswith(("from ", "import "))]
    assert imported == [
        "from pydantic import BaseModel",
        "from eddy import App, BoundedOutOfOrderness, Count, Topic, Tumbling",
    ]


def _run(app: Any, clicks: list[dict[str, Any]], out: str, late: str) -> tuple[Any, Any]:
    with TestDriver(app) as driver:
        click_type = sys.modules["clickstream.app"].Click
        for click in clicks:
            driver.send("clicks", click_type(**click))
        driver.end_of_input()
        windows = sorted(
            (o.value["user"], o.value["window_start_ms"], o.value["value"])
            for o in driver.read(out)
        )
        late_ones = sorted((o.value["user"], o.value["ts_ms"]) for o in driver.read(late))
        return windows, late_ones


CLICKS = st.lists(
    st.tuples(st.sampled_from(["ann", "bob", "cy"]), st.integers(0, 5 * MINUTE_MS)),
    max_size=60,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=CLICKS)
def test_the_timer_agent_gives_the_fluent_windows_results(
    user_package: tuple[ModuleType, ModuleType], raw: list[tuple[str, int]]
) -> None:
    fluent, timers = user_package
    clicks = [{"user": u, "page": "/", "ts_ms": ts} for u, ts in raw]
    expected = _run(fluent.app, clicks, "clicks-per-minute", "clicks-late")
    assert _run(timers.app, clicks, "clicks-per-minute-timers", "clicks-late-timers") == expected


def test_the_driver_fires_every_window_a_watermark_closes_a_checkpoints_worth_at_a_time(
    user_package: tuple[ModuleType, ModuleType],
) -> None:
    """Thirty users' minutes close at one watermark; the worker fires at most
    EDDY_WINDOW_FIRINGS_PER_CHECKPOINT per checkpoint, and the driver does the same."""
    fluent, _ = user_package
    clicks = [{"user": f"u{n:02}", "page": "/", "ts_ms": 1_000 + n} for n in range(30)]
    clicks.append({"user": "u00", "page": "/", "ts_ms": 5 * MINUTE_MS})  # closes minute 0

    def closed(firings: int) -> list[tuple[str, int, int]]:
        settings = {"window_firings_per_checkpoint": firings}
        with TestDriver(fluent.app, settings=settings) as driver:
            for click in clicks:
                driver.send("clicks", fluent.Click(**click))
            return [
                (o.value["user"], o.value["window_start_ms"], o.value["value"])
                for o in driver.read("clicks-per-minute")
            ]

    all_at_once = closed(10_000)
    assert sorted(all_at_once) == [(f"u{n:02}", 0, 1) for n in range(30)]
    assert closed(4) == all_at_once


def test_the_fluent_windows_are_counted_and_late_clicks_set_aside(
    user_package: tuple[ModuleType, ModuleType],
) -> None:
    fluent, _ = user_package
    clicks = [
        {"user": "ann", "page": "/", "ts_ms": 1_000},
        {"user": "ann", "page": "/a", "ts_ms": 30_000},
        {"user": "bob", "page": "/", "ts_ms": 70_000},  # the watermark passes minute 0
        {"user": "ann", "page": "/late", "ts_ms": 2_000},
    ]
    windows, late = _run(fluent.app, clicks, "clicks-per-minute", "clicks-late")
    assert windows == [("ann", 0, 2), ("bob", 60_000, 1)]
    assert late == [("ann", 2_000)]
    with TestDriver(fluent.app) as driver:
        for click in clicks:
            driver.send("clicks", fluent.Click(**click))
        assert driver.windows("clicks_per_minute", "ann") == [
            {"user": "ann", "window_start_ms": 0, "window_end_ms": 60_000, "value": 2,
             "timing": "first"}
        ]  # fmt: skip
        # The timer agent's open minutes are queryable state: bob's minute is open.
        assert driver.dead_letters() == []


def test_a_bad_click_goes_to_the_dead_letters_with_the_reason(
    user_package: tuple[ModuleType, ModuleType],
) -> None:
    fluent, timers = user_package
    for app in (fluent.app, timers.app):
        with TestDriver(app) as driver:
            driver.send("clicks", b'{"user": "ann", "page": "/"}', key="ann")
            (dead,) = driver.dead_letters()
            assert dead.reason == "ts_ms: Field required"


def test_the_timer_agents_open_minutes_are_its_queryable_state(
    user_package: tuple[ModuleType, ModuleType], tmp_path: Path
) -> None:
    _, timers = user_package
    with TestDriver(timers.app) as driver:
        driver.send("clicks", timers.Click(user="ann", page="/", ts_ms=61_000))
        driver.send("clicks", timers.Click(user="ann", page="/", ts_ms=62_000))
        assert driver.state("clicks_per_minute", timers.OPEN, "ann") == {"60000": 2}
