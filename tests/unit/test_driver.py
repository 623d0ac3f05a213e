"""The test driver runs the worker's own task code: the same dead letters and
headers, outputs with their headers, every window in time, empty states read as
the function reads them, a checkpoint rhythm that changes no result, and a
coroutine twin for every method that has work to do."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from eddy import App, Context, ListState, MapState, Topic, ValueState
from eddy import testing as testing_module
from eddy.testing import Output, TestDriver
from tests.support.user_apps import write_package

MINUTE_MS = 60_000


@pytest.fixture(scope="module")
def clickstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The README's click counter, as a user's package."""
    root = write_package(tmp_path_factory.mktemp("user"))
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module("clickstream.app")
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m.startswith("clickstream")]:
            del sys.modules[name]


def _click(module: ModuleType, user: str, ts_ms: int) -> Any:
    return module.Click(user=user, page="/", ts_ms=ts_ms)


def test_a_late_click_carries_the_watermark_it_was_late_against(clickstream: ModuleType) -> None:
    with TestDriver(clickstream.app) as driver:
        for ts_ms in (1_000, 70_000, 5_000):
            driver.send(clickstream.clicks, _click(clickstream, "ann", ts_ms))
        (late,) = driver.read(clickstream.late_clicks)
    assert (late.key, late.value.ts_ms, late.timestamp_ms) == ("ann", 5_000, 5_000)
    # BoundedOutOfOrderness(1 s) after 70 s: 70_000 - 1_000 - 1 (Flink's rule).
    assert dict(late.headers)["eddy.watermark_ms"] == b"68999"


def test_a_bad_record_is_dead_lettered_with_the_workers_headers(clickstream: ModuleType) -> None:
    with TestDriver(clickstream.app) as driver:
        driver.send(clickstream.clicks, _click(clickstream, "ann", 1_000))
        driver.send(clickstream.clicks, _click(clickstream, "bob", 2_000))
        driver.send("clicks", b"{not json", key="cy")
        (dead,) = driver.dead_letters()
    headers = dict(dead.headers)
    assert (dead.key, dead.value) == (b"cy", b"{not json")
    assert str(dead.reason).startswith("malformed JSON: ")
    assert headers["eddy.pipeline"] == b"clicks_per_minute"
    # The offset on the broker: it is the third record of the topic.
    assert (headers["eddy.source.topic"], headers["eddy.source.offset"]) == (b"clicks", b"2")
    assert headers["eddy.source.partition"] == b"0"


def test_windows_before_the_epoch_are_read_by_default(clickstream: ModuleType) -> None:
    with TestDriver(clickstream.app) as driver:
        for ts_ms in (-2 * MINUTE_MS + 5, -MINUTE_MS + 5, -MINUTE_MS + 7, 30_000):
            driver.send(clickstream.clicks, _click(clickstream, "ann", ts_ms))
        driver.end_of_input()
        every = driver.windows("clicks_per_minute", "ann")
        since_epoch = driver.windows("clicks_per_minute", "ann", from_ms=0)
    assert [(w["window_start_ms"], w["value"]) for w in every] == [
        (-2 * MINUTE_MS, 1),
        (-MINUTE_MS, 2),
        (0, 1),
    ]
    assert [w["window_start_ms"] for w in since_epoch] == [0]


def _outputs(driver: TestDriver, *topics: str) -> Counter[tuple[Any, ...]]:
    found: Counter[tuple[Any, ...]] = Counter()
    for topic in topics:
        for o in driver.read(topic):
            found[(topic, o.key, repr(o.value), o.timestamp_ms, o.headers)] += 1
    return found


CLICKS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["ann", "bob", "cy"]), st.integers(-MINUTE_MS, 4 * MINUTE_MS)),
        st.just(("bad", 0)),
    ),
    max_size=40,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=CLICKS, rhythm=st.sampled_from(["input", 1, 2, 3, 7]))
def test_the_checkpoint_rhythm_changes_no_result(
    clickstream: ModuleType, raw: list[tuple[str, int]], rhythm: Any
) -> None:
    """One fetch of everything, checkpointed once ("batch", the default) or every N
    records: the same outputs, late outputs and dead letters, headers included."""
    values = [
        b"{bad" if user == "bad" else _click(clickstream, user, ts_ms).model_dump()
        for user, ts_ms in raw
    ]
    results = []
    for checkpoint in ("batch", rhythm):
        with TestDriver(clickstream.app, checkpoint=checkpoint) as driver:
            driver.send_many("clicks", values)
            driver.end_of_input()
            topics = ("clicks-per-minute", "clicks-late", driver.settings.dead_letters)
            results.append(_outputs(driver, *topics))
    assert results[0] == results[1]


@pytest.mark.parametrize("bad", ["every 2", 0, -1, True, 1.5])
def test_a_checkpoint_rhythm_that_is_none_is_refused_in_one_line(
    clickstream: ModuleType, bad: Any
) -> None:
    with pytest.raises(ValueError, match=r'^checkpoint must be "batch", "input" or a number'):
        TestDriver(clickstream.app, checkpoint=bad)


class Probe(BaseModel):
    user: str
    op: str  # "add", "clear" or "read"


probes = Topic("probes", Probe, key="user")
seen = Topic("seen")
ITEMS = ListState("items", str, queryable=True)
PAGES = MapState("pages", int, queryable=True)
LAST = ValueState("last", str, queryable=True)
state_app = App("states")


@state_app.agent(probes, outputs=[seen], states=[ITEMS, PAGES, LAST])
async def keeper(probe: Probe, ctx: Context) -> None:
    items, pages, last = ctx.state(ITEMS), ctx.state(PAGES), ctx.state(LAST)
    if probe.op == "add":
        items.add("x")
        pages.put("/", 1)
        last.set("x")
    elif probe.op == "clear":
        items.update([])
        pages.remove("/")
        last.clear()
    # What the function reads, for the test to compare with driver.state().
    ctx.send(seen, {"items": items.get(), "pages": dict(pages.items()), "last": last.get()})


@pytest.mark.parametrize("ops", [["read"], ["add", "clear"], ["add"]])
def test_a_state_reads_in_the_driver_as_the_function_reads_it(ops: list[str]) -> None:
    with TestDriver(state_app) as driver:
        for op in ops:
            driver.send(probes, Probe(user="ann", op=op))
        in_function = driver.read(seen)[-1].value
        from_driver = {
            "items": driver.state("keeper", ITEMS, "ann"),
            "pages": driver.state("keeper", PAGES, "ann"),
            "last": driver.state("keeper", LAST, "ann"),
        }
    assert from_driver == in_function
    if ops[-1] != "add":
        assert from_driver == {"items": [], "pages": {}, "last": None}


failing_app = App("failing")
failing_out = Topic("failing-out")


@failing_app.agent(probes, outputs=[failing_out])
async def picky(probe: Probe, ctx: Context) -> None:
    if probe.op == "boom":
        raise ValueError("no boom here")
    ctx.send(failing_out, {"user": probe.user})


def test_an_agent_that_raises_fails_the_call_and_the_driver_goes_on() -> None:
    with TestDriver(failing_app) as driver:
        driver.send(probes, Probe(user="ann", op="read"))
        with pytest.raises(ValueError, match="no boom here"):
            driver.send(probes, Probe(user="bob", op="boom"))
        # Rewound to its last checkpoint, as a worker's task: the record is read
        # again, and fails again, before the next one.
        with pytest.raises(ValueError, match="no boom here"):
            driver.send(probes, Probe(user="cy", op="read"))
        assert [o.value for o in driver.read(failing_out)] == [{"user": "ann"}]


# -- the coroutine twins ------------------------------------------------------------------

NO_TWIN = {"stores"}  # hands out the stores: nothing runs


def _public_methods() -> list[str]:
    """Every public method of the driver that is not itself a twin."""
    names = {name for name, _ in inspect.getmembers(TestDriver, inspect.isfunction)}
    return sorted(
        name
        for name in names
        if not name.startswith("_") and not (name.startswith("a") and name[1:] in names)
    )


def test_every_method_with_work_has_a_coroutine_twin_and_the_docstring_says_which() -> None:
    doc = testing_module.__doc__ or ""
    for name in _public_methods():
        if name in NO_TWIN:
            assert f"``{name}()``" in doc
            continue
        assert inspect.iscoroutinefunction(getattr(TestDriver, f"a{name}", None)), name
        assert f"``a{name}``" in doc, name


async def test_a_coroutine_test_awaits_every_twin(clickstream: ModuleType) -> None:
    async with TestDriver(clickstream.app) as driver:
        await driver.asend(clickstream.clicks, _click(clickstream, "ann", 1_000))
        await driver.asend_many(clickstream.clicks, [_click(clickstream, "bob", 2_000)])
        await driver.aset_time(5_000)
        await driver.aadvance_time(1_000)
        await driver.awatermark(30_000)
        await driver.aend_of_input()
        counts = await driver.aread(clickstream.per_minute)
        assert sorted((o.key, o.value["value"]) for o in counts) == [("ann", 1), ("bob", 1)]
        assert [w["value"] for w in await driver.awindows("clicks_per_minute", "ann")] == [1]
        assert await driver.ahas_data("clicks_per_minute", "bob")
        assert await driver.adead_letters() == []
    async with TestDriver(state_app) as driver:
        await driver.asend(probes, Probe(user="ann", op="read"))
        assert await driver.astate("keeper", ITEMS, "ann") == []


def test_outputs_are_the_records_a_read_committed_consumer_sees(clickstream: ModuleType) -> None:
    with TestDriver(clickstream.app) as driver:
        driver.send(clickstream.clicks, _click(clickstream, "ann", 1_000))
        driver.end_of_input()
        (count,) = driver.read(clickstream.per_minute)
    assert count == Output("ann", count.value, 59_999, ())
    assert count.value["value"] == 1


def test_the_reference_page_lists_every_public_method_and_property() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    public = [name for name in vars(TestDriver) if not name.startswith("_")]
    missing = [name for name in public if f"`{name}" not in page]
    assert public
    assert missing == []
