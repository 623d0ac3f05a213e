"""The timer queue keeps only its earliest timers in memory and pages the rest in
from the store: what it fires, and when, must not depend on the page size."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from eddy.eventtime import Timer, TimerQueue, timer_order
from eddy.eventtime.memory import MemoryTimerStore
from eddy.tables.store import PartitionStore
from eddy.tables.windows import StoredTimers, timer_table

timers = st.builds(
    Timer,
    st.integers(0, 12),
    st.sampled_from(["window.0.trigger", "window.1.cleanup", "user"]),
    st.sampled_from(["s1", "s10", "s2", "é", ""]),
    st.integers(0, 2),
    st.integers(3, 4),
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("register"), timers),
        st.tuples(st.just("delete"), timers),
        st.tuples(st.just("fire"), st.integers(-1, 14)),
        st.tuples(st.just("reload"), st.none()),
    ),
    max_size=60,
)


class CountingStore(MemoryTimerStore):
    def __init__(self, page_size: int | None) -> None:
        super().__init__(page_size)
        self.writes = 0

    def put_timer(self, timer: Timer) -> None:
        self.writes += 1
        super().put_timer(timer)

    def delete_timer(self, timer: Timer) -> None:
        self.writes += 1
        super().delete_timer(timer)


@settings(max_examples=300)
@given(steps=steps, page_size=st.integers(1, 4))
def test_a_paged_queue_fires_what_a_set_of_timers_would(
    steps: list[tuple[str, object]], page_size: int
) -> None:
    store = CountingStore(page_size)
    queue = TimerQueue(store)
    queue.reload()
    expected: set[Timer] = set()
    writes = 0
    for action, arg in steps:
        if action == "register":
            assert isinstance(arg, Timer)
            writes += arg not in expected
            # As a new window's cleanup: the caller knows it is new.
            queue.register(arg, fresh=arg not in expected)
            expected.add(arg)
        elif action == "delete":
            assert isinstance(arg, Timer)
            writes += arg in expected
            expected.discard(arg)
            queue.delete(arg)
        elif action == "fire":
            assert isinstance(arg, int)
            due = sorted((t for t in expected if t.time_ms <= arg), key=timer_order)
            assert queue.due(arg) or not due
            assert list(queue.pop_due(arg)) == due
            writes += len(due)
            expected -= set(due)
        else:
            queue.reload()
        assert queue.next_time_ms() == min((t.time_ms for t in expected), default=None)
        assert store.timers == expected
        assert queue.held <= 2 * page_size
    # Registering a timer it has, or deleting one it has not, writes nothing.
    assert store.writes == writes


def test_a_timer_registered_while_firing_fires_in_the_same_pass_if_due() -> None:
    queue = TimerQueue(MemoryTimerStore(page_size=1))
    queue.reload()
    for time_ms in (5, 9, 30):
        queue.register(Timer(time_ms, "user", "k"))
    fired = []
    for timer in queue.pop_due(10):
        fired.append(timer.time_ms)
        if timer.time_ms == 5:
            queue.register(Timer(7, "user", "k"))
            queue.register(Timer(11, "user", "k"))
    assert fired == [5, 7, 9]
    assert queue.next_time_ms() == 11


def test_a_million_keys_cleanup_timers_at_one_instant_fire_a_page_at_a_time(
    tmp_path: Path,
) -> None:
    # Every key's tumbling window ends at the same instant: the queue must cut
    # within it, and see the open transaction's timers as well as committed ones.
    store = PartitionStore(tmp_path / "db")
    txn = store.begin()
    table = timer_table("timers")
    stored = StoredTimers(txn, table, page_size=50)
    queue = TimerQueue(stored)
    queue.reload()
    for n in range(1_000):
        queue.register(Timer(9_999, "window.1.cleanup", f"sensor-{n}"))
        if n % 40 == 39:  # a checkpoint
            txn.commit(txn.changelog_records(), n)
    # Two pages of 50 at most: the checkpoints were smaller than a page.
    assert queue.held <= 100
    for n in range(1_000, 1_500):  # uncommitted, beyond the front
        queue.register(Timer(9_999, "window.1.cleanup", f"sensor-{n}"))
    queue.delete(Timer(9_999, "window.1.cleanup", "sensor-1499"))
    queue.register(Timer(5_000, "user", "early"))
    assert queue.next_time_ms() == 5_000
    fired = [t.key for t in queue.pop_due(9_999)]
    assert fired[0] == "early"
    keys = [f"sensor-{n}" for n in range(1_499)]
    assert sorted(fired[1:]) == sorted(keys)
    assert fired[1:] == sorted(keys, key=lambda k: (len(k), k))
    assert queue.held == 0
    assert queue.next_time_ms() is None
    store.close()
