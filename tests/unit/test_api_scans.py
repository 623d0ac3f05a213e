"""Scans in bounded work (service/app/scans.py), on real RocksDB stores: paging
with the continuation finds every key exactly once, in the store's order, however
small the budget; a sparse prefix costs seeks per key length, not per key; a
window's results come in pages, ranked or not, whose union is the whole window;
the pages of several workers merge into one; and scans share the event loop in
slices."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eddy import examples
from eddy.app.plan import View
from eddy.app.queries import Freshness, PartitionUnavailableError, ServedPartition
from eddy.app.scans import Budget, Scans, merge_pages, position
from eddy.app.scans import keys as scan_keys
from eddy.app.scans import window_slice as scan_window
from eddy.eventtime import TimeWindow
from eddy.pipeline.windowed import RESULTS, RESULTS_BY_WINDOW
from eddy.settings import Settings, build
from eddy.tables.keyed import state_table
from eddy.tables.store import PartitionStore
from tests.support.kafka import TEST_AGENT_SETTINGS

WINDOW = TimeWindow(60_000, 120_000)
ALPHABET = st.sampled_from(["a", "b", "z", "/", ".", "%", " ", "é", "\x00"])
KEYS = st.lists(st.text(ALPHABET, min_size=1, max_size=5), unique=True, max_size=40)


def _views() -> list[View]:
    settings = build(Settings, {"topic_prefix": ""})
    return examples.app.build(settings, [*examples.app.default_agents], TEST_AGENT_SETTINGS).views


VIEWS = _views()
WINDOWS = next(v for v in VIEWS if v.agent == "sensor_averages" and v.kind == "windows")
STATE = next(v for v in VIEWS if v.kind == "state")


class Stage:
    """:class:`ServedStage` over stores written here: partitions 0..n-1 all served."""

    def __init__(self, stores: list[PartitionStore]) -> None:
        self.stores = stores
        self.moved: set[int] = set()  # closed, and served elsewhere now

    @property
    def partition_count(self) -> int:
        return len(self.stores)

    @property
    def endpoint(self) -> str | None:
        return "http://me"

    def restoring(self, partition: int) -> bool:
        return False

    def serve(self, partition: int) -> ServedPartition | None:
        if partition in self.moved:
            return None
        return ServedPartition(partition, self.stores[partition], Freshness(partition, None, {}))

    def served(self) -> list[int]:
        return [p for p in range(len(self.stores)) if p not in self.moved]

    def owner_of(self, partition: int) -> str | None:
        return None


@contextmanager
def stage_of(keys: list[str], partitions: int = 3, view: View = WINDOWS) -> Iterator[Stage]:
    """Each key, in partition ``hash % partitions``, with a result in ``WINDOW`` and
    one in the window before (or, for a state view, a value)."""
    with tempfile.TemporaryDirectory() as root:
        stores = [PartitionStore(Path(root) / str(p)) for p in range(partitions)]
        txns = [store.begin() for store in stores]
        for n, key in enumerate(keys):
            txn = txns[sum(key.encode()) % partitions]
            if view.kind == "state":
                assert view.descriptor is not None
                txn.put(state_table(view.descriptor.name), key, n)
                continue
            for window in (TimeWindow(0, 60_000), WINDOW):
                row = {"sensor_id": key, "window_start_ms": window.start_ms, "count": n % 7}
                txn.put(RESULTS, (key, window), row)
                txn.put(RESULTS_BY_WINDOW, (window, key), row)
        for txn in txns:
            txn.commit(txn.changelog_records(), 1)
        stage = Stage(stores)
        try:
            yield stage
        finally:
            for partition, store in enumerate(stores):
                if partition not in stage.moved:
                    store.close()


def run(steps: Any) -> Any:
    """A scan to its end, in one go (what Scans.run does in slices)."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def every_page(stage: Stage, view: View, prefix: str, limit: int, max_keys: int) -> list[Any]:
    pages, after = [], None
    for _ in range(10_000):
        page = run(scan_keys(stage, view, prefix, after, limit, Budget(max_keys, 60_000)))
        pages.append(page)
        if page.next_after is None:
            return pages
        assert after is None or position(view.kind, page.next_after) > position(view.kind, after)
        after = page.next_after
    raise AssertionError("no end")


@settings(max_examples=60, deadline=None)
@given(
    keys=KEYS,
    prefix=st.text(ALPHABET, max_size=2),
    limit=st.integers(1, 5),
    max_keys=st.integers(1, 6),
    kind=st.sampled_from(["windows", "state"]),
)
def test_paging_with_the_continuation_finds_every_key_once_in_store_order(
    keys: list[str], prefix: str, limit: int, max_keys: int, kind: str
) -> None:
    view = WINDOWS if kind == "windows" else STATE
    with stage_of(keys, view=view) as stage:
        pages = every_page(stage, view, prefix, limit, max_keys)
    found = [key for page in pages for key in page.keys]
    wanted = sorted((k for k in keys if k.startswith(prefix)), key=lambda k: position(kind, k))
    assert found == wanted
    assert all(len(page.keys) <= limit for page in pages)
    assert all(page.partitions == [0, 1, 2] for page in pages)
    # A page short of its limit, with more to come, is one whose budget ran out.
    for page in pages[:-1]:
        assert len(page.keys) == limit or page.budget_exhausted


def test_a_prefix_that_matches_nothing_costs_a_few_seeks_not_one_per_key() -> None:
    keys = [f"sensor_{n}" for n in range(20_000)]
    with stage_of(keys, partitions=2) as stage:
        page = run(scan_keys(stage, WINDOWS, "zzz", None, 1, Budget(50_000, 60_000)))
        assert (page.keys, page.next_after, page.budget_exhausted) == ([], None, False)
        # Lengths 8 to 12 hold every key: a seek or two per length and partition.
        assert sum(store.keys_scanned for store in stage.stores) <= 2 * 2 * 6
        some = run(scan_keys(stage, WINDOWS, "sensor_1999", None, 20, Budget(50_000, 60_000)))
        assert some.keys == ["sensor_1999", *(f"sensor_1999{d}" for d in range(10))]


def test_a_spent_budget_answers_what_it_found_and_where_to_go_on() -> None:
    keys = [f"k{n:03}" for n in range(30)]
    with stage_of(keys) as stage:
        page = run(scan_keys(stage, WINDOWS, "", None, 100, Budget(10, 60_000)))
        assert page.budget_exhausted
        assert page.keys == keys[:10]
        assert page.next_after == "k009"
        rest = run(scan_keys(stage, WINDOWS, "", page.next_after, 100, Budget(100, 60_000)))
        assert (rest.keys, rest.next_after, rest.budget_exhausted) == (keys[10:], None, False)


def test_the_time_budget_ends_a_scan_too() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 0.001  # each look at the clock: a millisecond later
        return now[0]

    keys = [f"k{n:03}" for n in range(100)]
    with stage_of(keys) as stage:
        page = run(scan_keys(stage, WINDOWS, "", None, 1_000, Budget(1_000_000, 5, clock=clock)))
    assert page.budget_exhausted
    assert 1 <= len(page.keys) <= 5
    assert page.next_after == page.keys[-1]


def test_a_partition_that_moves_during_a_scan_is_503() -> None:
    with stage_of([f"k{n}" for n in range(50)]) as stage:
        steps = scan_keys(stage, WINDOWS, "", None, 100, Budget(1_000, 60_000))
        next(steps)
        stage.stores[1].close()  # its process reopened it; the group moved it away
        stage.moved.add(1)
        with pytest.raises(PartitionUnavailableError, match="partition 1 moved"):
            run(steps)


@settings(max_examples=40, deadline=None)
@given(keys=KEYS, limit=st.integers(1, 4), max_keys=st.integers(1, 5), ranked=st.booleans())
def test_a_windows_results_come_in_pages_whose_union_is_the_window(
    keys: list[str], limit: int, max_keys: int, ranked: bool
) -> None:
    order_by = "count" if ranked else None
    with stage_of(keys) as stage:
        pages, after = [], None
        while True:
            budget = Budget(max_keys, 60_000)
            page = run(scan_window(stage, WINDOW.start_ms, after, order_by, True, limit, budget))
            pages.append(page)
            if page.next_after is None:
                break
            after = page.next_after
    assert all(page.window == (WINDOW if keys else None) for page in pages)
    rows = [row for page in pages for row in page.rows]
    assert all(row["window_start_ms"] == WINDOW.start_ms for row in rows)
    if not ranked:
        in_order = sorted(keys, key=lambda k: position("windows", k))
        assert [row["sensor_id"] for row in rows] == in_order
        return
    # Each page ranks what it examined; the best of every page are the window's best.
    counts = sorted((n % 7 for n in range(len(keys))), reverse=True)[:limit]
    assert sorted((r["count"] for r in rows), reverse=True)[:limit] == counts
    for page in pages:
        assert [r["count"] for r in page.rows] == sorted(
            (r["count"] for r in page.rows), reverse=True
        )


def test_the_newest_window_is_the_default_and_a_missing_field_is_refused() -> None:
    with stage_of(["a", "b"]) as stage:
        page = run(scan_window(stage, None, None, None, True, 10, Budget(100, 60_000)))
        assert page.window == WINDOW
        assert [r["sensor_id"] for r in page.rows] == ["a", "b"]
        with pytest.raises(ValueError, match="no field 'nope'"):
            run(scan_window(stage, None, None, "nope", True, 10, Budget(100, 60_000)))
        empty = run(scan_window(stage, 5, None, None, True, 10, Budget(100, 60_000)))
        assert (empty.window, empty.rows, empty.next_after) == (None, [], None)


@settings(max_examples=200)
@given(
    keys=st.lists(st.text(ALPHABET, min_size=1, max_size=4), unique=True, max_size=30),
    workers=st.integers(1, 4),
    limit=st.integers(1, 6),
    data=st.data(),
)
def test_the_pages_of_several_workers_merge_into_one_that_pages_on(
    keys: list[str], workers: int, limit: int, data: st.DataObject
) -> None:
    """Each worker answers the keys it examined, up to a continuation of its own;
    paging through the merged pages finds every key once, in order."""

    def at(key: str) -> bytes:
        return position("windows", key)

    ordered = sorted(keys, key=at)
    owner = {key: data.draw(st.integers(0, workers - 1)) for key in keys}
    found: list[str] = []
    after: str | None = None
    for _ in range(1_000):
        parts: list[tuple[list[str], str | None]] = []
        for worker in range(workers):
            mine = [
                k for k in ordered if owner[k] == worker and (after is None or at(k) > at(after))
            ]
            budget = data.draw(st.integers(1, len(mine) + 1))  # keys it may examine
            if min(len(mine), budget) > limit:  # a full page, and one more
                parts.append((mine[:limit], mine[limit - 1]))
            elif budget <= len(mine):  # its budget ran out
                parts.append((mine[:budget], mine[budget - 1]))
            else:  # its end
                parts.append((mine, None))
        page, after = merge_pages(parts, str, at, limit)
        assert len(page) <= limit
        found += page
        if after is None:
            break
    assert found == ordered


async def test_scans_take_turns_on_the_loop_in_slices_of_one_round() -> None:
    """With a round of 10 ms, a scan alone runs 10 ms at a time, two run 5 ms each in
    turn, and whatever else waits for the loop (a probe) runs after each round."""
    now = [0.0]
    trace: list[str] = []

    def scan(name: str, steps: int) -> Any:
        for _ in range(steps):
            trace.append(name)
            now[0] += 0.001  # a step: a millisecond
            yield
        return name

    scans = Scans(round_ms=10, share=1.0, clock=lambda: now[0], cpu_clock=lambda: now[0])

    async def probe() -> None:
        for _ in range(3):
            trace.append("P")
            await asyncio.sleep(0)

    results = await asyncio.gather(scans.run(scan("a", 20)), scans.run(scan("b", 20)), probe())
    assert list(results[:2]) == ["a", "b"]
    rounds = ["a" * 10 + "b" * 5, "a" * 5 + "b" * 5, "a" * 5 + "b" * 5, "b" * 5]
    assert "".join(trace) == "P".join(rounds)
    assert scans.active == 0


async def test_scans_leave_the_loop_idle_as_long_as_they_ran() -> None:
    """Paced at half the loop's time: after each slice the loop is left idle as long,
    and a scan that waited (another request had the loop) owes nothing for it."""
    step_s = 2**-10  # about a millisecond, exact in binary: times compare exactly
    now = [0.0]
    trace: list[str] = []

    async def sleep(seconds: float) -> None:
        trace.append(f"idle {round(seconds / step_s)}")
        now[0] += seconds
        await asyncio.sleep(0)

    def scan(name: str, steps: int) -> Any:
        for _ in range(steps):
            trace.append(name)
            now[0] += step_s
            yield
        return name

    def clock() -> float:  # a fake one, for wall time and CPU alike
        return now[0]

    scans = Scans(round_ms=4_000 * step_s, share=0.5, clock=clock, sleep=sleep, cpu_clock=clock)
    assert await scans.run(scan("a", 9)) == "a"
    assert trace == [*"aaaa", "idle 4", *"aaaa", "idle 4", "a"]
    trace.clear()
    now[0] += 1.0  # the loop did other work meanwhile: that was the idle owed, and more
    assert await scans.run(scan("b", 5)) == "b"
    assert trace == [*"bbbb", "idle 4", "b"]
    trace.clear()

    def slow() -> Any:  # a step of 20: a store reopened, say
        now[0] += 20 * step_s
        yield
        trace.append("c")

    await scans.run(slow())
    assert trace == ["idle 1", "idle 4", "c"]  # b's last step owed 1; then one round at most


def test_a_spent_budget_stops_only_at_a_key_short_enough_to_go_on_from() -> None:
    """A continuation goes back in a URL: a key over 4,096 characters cannot be one,
    so the scan goes on past it."""
    long_ones = ["b" * 5_000, "c" * 5_000]
    with stage_of(["a", "d", *long_ones], partitions=1) as stage:
        pages = every_page(stage, WINDOWS, "", limit=10, max_keys=1)
    assert [(p.keys, p.next_after) for p in pages] == [
        (["a"], "a"),
        (["d"], "d"),
        (long_ones, None),
    ]
