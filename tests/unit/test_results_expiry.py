"""Queryable window results leave state by processing time (``retention_ms`` after
their last write, by the worker's clock) or past a per-key cap, never because the
watermark moved: one record stamped days ahead cannot empty other keys' history.
Neither opening a partition nor a checkpoint reads the results that stay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eddy.eventtime import BoundedOutOfOrderness, Count, Tumbling, WindowSpec
from eddy.pipeline.base import Target
from eddy.pipeline.source import Source
from eddy.pipeline.windowed import RESULT_EXPIRY, RESULTS, WindowedAggregation, WindowedLogic
from eddy.serde import Json
from eddy.tables.store import PartitionStore, PartitionTransaction
from tests.support.fakes import CollectingOutput, FakeRecord

SIZE_MS = 1_000
DAY_MS = 86_400_000
START_MS = 1_700_000_000_000  # the fake wall clock's first reading


def definition(
    retention_ms: int = DAY_MS, lateness_ms: int = 0, per_key: int | None = None
) -> WindowedAggregation:
    source = Source("input", Json(), timestamp_ms=lambda v: v["ts"], key=lambda v: v["sensor"])
    return WindowedAggregation(
        "counts",
        inputs=(source,),
        watermark=BoundedOutOfOrderness(bound_ms=0),
        window=WindowSpec(Tumbling(size_ms=SIZE_MS), Count(), allowed_lateness_ms=lateness_ms),
        outputs=(Target("counts", orjson.dumps),),
        queryable=True,
        results_retention_ms=retention_ms,
        results_per_key=per_key,
    )


class Partition:
    """One partition's logic over a store, checkpointed and reopened as a task is,
    on a fake wall clock the runtime ticks in before any record."""

    def __init__(self, path: Path, d: WindowedAggregation) -> None:
        self.d = d
        self.path = path
        self.store = PartitionStore(path)
        self.out = CollectingOutput()
        self.offset = 0
        self.now_ms = START_MS
        self.changelog: list[tuple[bytes, bytes | None]] = []
        self.open()

    def open(self) -> None:
        self.txn: PartitionTransaction = self.store.begin()
        self.logic: WindowedLogic = self.d.create_logic(0, self.store, self.txn)
        self.logic.on_tick(self.now_ms, self.out)

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self.logic.on_tick(self.now_ms, self.out)

    def send(self, sensor: str, ts: int) -> None:
        value = orjson.dumps({"sensor": sensor, "ts": ts})
        self.logic.process(FakeRecord(self.offset, value), self.out)
        self.offset += 1

    def checkpoint(self) -> None:
        self.logic.prepare_commit()
        records = self.txn.changelog_records()
        self.changelog += records
        self.txn.commit(records, len(self.changelog))

    def crash(self) -> None:
        """The checkpoint in progress is lost; the task reopens from the store."""
        self.txn.discard()
        self.open()

    def restored(self, path: Path) -> Partition:
        """Another worker's copy of this partition, rebuilt from the changelog alone,
        whose clock reads the same."""
        copy = Partition.__new__(Partition)
        copy.d, copy.path, copy.out, copy.offset = self.d, path, CollectingOutput(), self.offset
        copy.now_ms, copy.changelog = self.now_ms, list(self.changelog)
        copy.store = PartitionStore(path)
        with copy.store.restoring() as restoring:
            restoring.write(self.changelog, len(self.changelog))
        copy.open()
        return copy

    def kept(self) -> set[tuple[str, int]]:
        return {(key, window.start_ms) for (key, window), _ in self.store.scan(RESULTS)}

    def keys_read(self) -> int:
        return self.store.reads + self.store.keys_scanned


def test_a_record_two_days_ahead_on_one_key_leaves_every_other_key_s_results(
    tmp_path: Path,
) -> None:
    part = Partition(tmp_path / "p0", definition())
    for second in range(10):
        for sensor in "abc":
            part.send(sensor, second * SIZE_MS)
    part.checkpoint()
    before = part.kept()
    assert len(before) == 27  # windows [0 s, 9 s) of a, b, c; [9 s, 10 s) still open
    part.send("broken-clock", 9 * SIZE_MS + 2 * DAY_MS)  # every window closes
    part.checkpoint()
    part.advance(60_000)
    part.checkpoint()
    assert part.kept() == before | {(s, 9 * SIZE_MS) for s in "abc"}
    assert part.logic.watermark_ms == 9 * SIZE_MS + 2 * DAY_MS - 1


def test_results_expire_a_retention_after_their_last_write_by_the_worker_s_clock(
    tmp_path: Path,
) -> None:
    part = Partition(tmp_path / "p0", definition(retention_ms=60_000, lateness_ms=5 * SIZE_MS))
    part.send("a", 0)
    part.send("b", 100)
    part.send("clock", SIZE_MS)  # window [0 s, 1 s) fires for a and b
    part.checkpoint()
    part.advance(30_000)
    part.send("a", 500)  # late, within lateness: a's result is written again, 30 s later
    part.checkpoint()
    part.advance(29_999)
    part.checkpoint()
    assert {k for k, _ in part.kept()} == {"a", "b"}  # 59.999 s after b's write: kept
    part.advance(1)  # b's 60 s are up: the tick deletes it, no record needed
    assert part.txn.dirty  # so the idle partition's next checkpoint is due
    part.checkpoint()
    assert {k for k, _ in part.kept()} == {"a"}  # a was rewritten
    part.advance(29_999)
    part.checkpoint()
    assert {k for k, _ in part.kept()} == {"a"}
    part.advance(1)
    part.checkpoint()
    assert part.kept() == set()
    assert list(part.store.scan(RESULT_EXPIRY)) == []  # nothing left to sweep


def test_the_per_key_cap_keeps_each_key_s_newest_windows(tmp_path: Path) -> None:
    part = Partition(tmp_path / "p0", definition(per_key=3, lateness_ms=10 * SIZE_MS))
    for second in range(6):
        part.send("a", second * SIZE_MS)
    part.send("b", 0)
    part.send("clock", 6 * SIZE_MS)
    part.checkpoint()
    assert part.kept() == {("a", 3_000), ("a", 4_000), ("a", 5_000), ("b", 0)}
    part.send("a", 100)  # a late update of a window the cap dropped: it stays dropped
    part.send("a", 4_100)  # of one it keeps: kept, updated
    part.checkpoint()
    assert part.kept() == {("a", 3_000), ("a", 4_000), ("a", 5_000), ("b", 0)}
    counts = {(k, w.start_ms): v["value"] for (k, w), v in part.store.scan(RESULTS)}
    assert counts[("a", 4_000)] == 2


def test_a_partition_restored_from_the_changelog_keeps_and_expires_the_same(
    tmp_path: Path,
) -> None:
    part = Partition(tmp_path / "p0", definition(retention_ms=60_000, per_key=2))
    for second in range(4):
        part.send("a", second * SIZE_MS)
        part.send("b", second * SIZE_MS)
        part.checkpoint()
        part.advance(10_000)
    part.send("broken-clock", 2 * DAY_MS)
    part.checkpoint()
    copy = part.restored(tmp_path / "p0-restored")
    assert copy.kept() == part.kept() == {(s, n * SIZE_MS) for s in "ab" for n in (2, 3)}
    for p in (part, copy):
        p.advance(50_000)  # 60 s after window [2 s, 3 s) fired (at 30 s; [3 s, 4 s) at 40 s)
        p.checkpoint()
    assert copy.kept() == part.kept() == {("a", 3_000), ("b", 3_000)}


def fill(path: Path, sensors: int, windows: int) -> Partition:
    """``sensors`` x ``windows`` results kept, window n written n seconds after the
    first, every window closed but one."""
    part = Partition(path, definition(retention_ms=3_600_000))
    for n in range(windows):
        for s in range(sensors):
            part.send(f"sensor_{s}", n * SIZE_MS)
        part.checkpoint()
        part.advance(SIZE_MS)
    part.send("clock", windows * SIZE_MS)
    part.checkpoint()
    assert len(part.kept()) == sensors * windows
    return part


def test_opening_a_partition_reads_the_same_few_keys_however_many_results_it_keeps(
    tmp_path: Path,
) -> None:
    reads = {}
    for sensors in (2, 200):
        part = fill(tmp_path / str(sensors), sensors, windows=10)
        before = part.keys_read()
        part.open()
        reads[sensors] = part.keys_read() - before
    # The watermark and the one open window's timer (read twice: by the event-time
    # core as it is built, then with the watermark restored), and the first tick's
    # look at when the next result expires: nothing per result.
    assert reads == {2: 4, 200: 4}


def test_a_sweep_reads_only_the_results_that_expire(tmp_path: Path) -> None:
    part = fill(tmp_path / "p0", sensors=100, windows=10)
    before = part.keys_read()
    part.advance(3_600_000 - 7 * SIZE_MS)  # the windows written first: 300 results due
    part.checkpoint()
    # Each due result: its index entry and its latest write's expiry; then the one
    # entry that says when the next sweep is due.
    assert part.keys_read() - before == 2 * 300 + 1
    assert {start for key, start in part.kept() if key != "clock"} == {
        n * SIZE_MS for n in range(3, 10)
    }
    before = part.keys_read()
    part.advance(SIZE_MS - 1)  # nothing more is due: no tick or checkpoint reads
    part.checkpoint()
    assert part.keys_read() == before


@pytest.mark.parametrize(
    ("retention_ms", "per_key", "reason"),
    [(0, None, "results_retention_ms must be from 1 to"), (1, 0, "results_per_key must be >= 1")],
)
def test_a_retention_that_would_keep_nothing_is_refused(
    retention_ms: int, per_key: int | None, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        definition(retention_ms=retention_ms, per_key=per_key)


# A partition's life: readings (sensor, second), the clock moving (seconds),
# checkpoints, crashes (the checkpoint in progress lost) and reopens after a commit.
# Sends are drawn most often, so windows fire, update and pass the cap in most lives.
# A narrow span of seconds, so late updates of fired windows are common.
sends = st.tuples(st.just("send"), st.sampled_from("ab"), st.integers(0, 10))
lives = st.lists(
    st.one_of(
        sends,
        sends,
        sends,
        sends,
        sends,
        st.tuples(st.just("advance"), st.integers(1, 4)),
        st.tuples(st.just("advance"), st.integers(1, 4)),
        st.just(("checkpoint",)),
        st.just(("crash",)),
        st.just(("reopen",)),
    ),
    min_size=25,
    max_size=60,
)
Window = tuple[str, int]


class Model:
    """What should be kept: each window's latest count and when it expires."""

    def __init__(self, retention_ms: int, per_key: int | None) -> None:
        self.retention_ms, self.per_key = retention_ms, per_key
        self.kept: dict[Window, tuple[int, int]] = {}

    def write(self, window: Window, count: int, now_ms: int) -> None:
        self.kept[window] = (count, now_ms + self.retention_ms)
        if self.per_key is not None:
            mine = sorted(w for w in self.kept if w[0] == window[0])
            for dropped in mine[: -self.per_key]:
                del self.kept[dropped]

    def sweep(self, now_ms: int) -> None:
        self.kept = {w: v for w, v in self.kept.items() if v[1] > now_ms}


@settings(max_examples=300, deadline=None)
@given(
    life=lives,
    retention_s=st.integers(1, 6),
    lateness_s=st.integers(0, 8),
    per_key=st.one_of(st.none(), st.integers(1, 3)),
)
def test_a_committed_result_is_kept_while_its_last_write_plus_retention_is_ahead(
    tmp_path_factory: Any,
    life: list[tuple[Any, ...]],
    retention_s: int,
    lateness_s: int,
    per_key: int | None,
) -> None:
    """Whatever the order of records, clock moves, checkpoints, crashes and reopens,
    and with updates firing long after their window: after each checkpoint the store
    holds the latest result of exactly the windows whose last write is less than the
    retention ago (by the clock), and of each key at most the newest ``per_key``
    (a result past its retention no longer counts: each tick deletes those)."""
    d = definition(SIZE_MS * retention_s, lateness_ms=lateness_s * SIZE_MS, per_key=per_key)
    part = Partition(tmp_path_factory.mktemp("expiry") / "p0", d)
    committed = Model(d.results_retention_ms, per_key)
    pending = Model(d.results_retention_ms, per_key)
    for step in life:
        if step[0] == "send":
            part.send(step[1], step[2] * SIZE_MS + 10)
            for result in part.out.sent:
                window = (result["key"], result["window_start_ms"])
                pending.write(window, result["value"], part.now_ms)
            part.out.sent.clear()
        elif step[0] == "advance":
            part.advance(step[1] * SIZE_MS)
            pending.sweep(part.now_ms)  # a tick deletes what is due, before any record
        elif step[0] in ("checkpoint", "reopen"):
            part.checkpoint()
            pending.sweep(part.now_ms)
            committed.kept = dict(pending.kept)
            stored = {(k, w.start_ms): v["value"] for (k, w), v in part.store.scan(RESULTS)}
            assert stored == {w: count for w, (count, _) in committed.kept.items()}
            if step[0] == "reopen":
                part.open()
        else:
            part.crash()
            pending.kept = dict(committed.kept)
            pending.sweep(part.now_ms)
    part.store.close()
