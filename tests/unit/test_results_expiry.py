"""Queryable window results leave state ``retention_ms`` of event time after their
window ends, at the first checkpoint whose watermark has reached that time; and
neither opening a partition nor a checkpoint reads the results that stay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
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


def definition(retention_ms: int, lateness_ms: int = 0) -> WindowedAggregation:
    source = Source("input", Json(), timestamp_ms=lambda v: v["ts"], key=lambda v: v["sensor"])
    return WindowedAggregation(
        "counts",
        inputs=(source,),
        watermark=BoundedOutOfOrderness(bound_ms=0),
        window=WindowSpec(Tumbling(size_ms=SIZE_MS), Count(), allowed_lateness_ms=lateness_ms),
        outputs=(Target("counts", orjson.dumps),),
        queryable=True,
        results_retention_ms=retention_ms,
    )


class Partition:
    """One partition's logic over a store, checkpointed and reopened as a task is."""

    def __init__(self, path: Path, d: WindowedAggregation) -> None:
        self.d = d
        self.store = PartitionStore(path)
        self.out = CollectingOutput()
        self.offset = 0
        self.open()

    def open(self) -> None:
        self.txn: PartitionTransaction = self.store.begin()
        self.logic: WindowedLogic = self.d.create_logic(0, self.store, self.txn)

    def send(self, sensor: str, ts: int) -> None:
        value = orjson.dumps({"sensor": sensor, "ts": ts})
        self.logic.process(FakeRecord(self.offset, value), self.out)
        self.offset += 1

    def checkpoint(self) -> None:
        self.logic.prepare_commit()
        self.txn.commit(self.txn.changelog_records(), None)

    def crash(self) -> None:
        """The checkpoint in progress is lost; the task reopens from the store."""
        self.txn.discard()
        self.open()

    def kept(self) -> set[tuple[str, int]]:
        return {(key, window.start_ms) for (key, window), _ in self.store.scan(RESULTS)}

    def keys_read(self) -> int:
        return self.store.reads + self.store.keys_scanned


def test_results_older_than_retention_are_gone_after_a_commit_and_newer_ones_stay(
    tmp_path: Path,
) -> None:
    part = Partition(tmp_path / "p0", definition(retention_ms=20_000))
    for second in range(10):
        part.send("a", second * SIZE_MS)
        part.send("b", second * SIZE_MS + 500)
    part.checkpoint()  # the watermark is 9,499: windows up to [8 s, 9 s) fired
    assert part.kept() == {(s, n * SIZE_MS) for s in "ab" for n in range(9)}
    part.send("a", 25_000)  # watermark 24,999: the windows ending by 4,999 are due
    assert len(part.kept()) == 18  # still there until the checkpoint
    part.checkpoint()
    assert part.kept() == {(s, n * SIZE_MS) for s in "ab" for n in range(4, 10)}
    expiring = {t.window_start_ms for t, _ in part.store.scan(RESULT_EXPIRY)}
    assert expiring == {n * SIZE_MS for n in range(4, 10)}


def fill(path: Path, sensors: int, windows: int) -> Partition:
    """``sensors`` x ``windows`` results kept, every window closed but one."""
    part = Partition(path, definition(retention_ms=3_600_000))
    for n in range(windows):
        for s in range(sensors):
            part.send(f"sensor_{s}", n * SIZE_MS)
        part.checkpoint()
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
    # core as it is built, then with the watermark restored): nothing per result.
    assert reads == {2: 3, 200: 3}


def test_a_checkpoint_reads_only_the_results_that_expire(tmp_path: Path) -> None:
    part = fill(tmp_path / "p0", sensors=100, windows=10)
    part.send("clock", 3_600_000 + 3 * SIZE_MS + 1)  # windows [0 s, 3 s) are due: 300 results
    before = part.keys_read()
    part.checkpoint()
    assert part.keys_read() - before == 300
    assert {start for key, start in part.kept() if key != "clock"} == {
        n * SIZE_MS for n in range(3, 10)
    }
    part.send("clock", 3_600_000 + 3 * SIZE_MS + 2)  # nothing more is due
    before = part.keys_read()
    part.checkpoint()
    assert part.keys_read() == before


# A partition's life: readings (sensor, second), checkpoints, crashes (the
# checkpoint in progress lost) and reopens after a commit.
lives = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.sampled_from("ab"), st.integers(0, 20)),
        st.just(("checkpoint",)),
        st.just(("crash",)),
        st.just(("reopen",)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(life=lives, retention_s=st.integers(0, 6), lateness_s=st.integers(0, 8))
def test_a_committed_result_is_kept_exactly_while_its_window_end_plus_retention_is_ahead(
    tmp_path_factory: Any, life: list[tuple[Any, ...]], retention_s: int, lateness_s: int
) -> None:
    """Whatever the order of records, checkpoints, crashes and reopens, and with
    updates firing after their window's result expired (lateness > retention): after
    each checkpoint the store holds the latest result of exactly the windows that
    fired and whose end + retention is after the committed watermark."""
    d = definition(retention_ms=retention_s * SIZE_MS, lateness_ms=lateness_s * SIZE_MS)
    part = Partition(tmp_path_factory.mktemp("expiry") / "p0", d)
    fired: dict[tuple[str, int], int] = {}  # committed: window -> its latest count
    pending: dict[tuple[str, int], int] = {}
    for step in life:
        if step[0] == "send":
            part.send(step[1], step[2] * SIZE_MS + 10)
            for result in part.out.sent:
                pending[(result["key"], result["window_start_ms"])] = result["value"]
            part.out.sent.clear()
        elif step[0] == "checkpoint":
            part.checkpoint()
            fired.update(pending)
            pending = {}
            watermark = part.logic.watermark_ms
            alive = {
                w: c
                for w, c in fired.items()
                if w[1] + SIZE_MS + d.results_retention_ms > watermark
            }
            stored = {(k, w.start_ms): v["value"] for (k, w), v in part.store.scan(RESULTS)}
            assert stored == alive
        elif step[0] == "crash":
            part.crash()
            pending = {}
        else:
            part.checkpoint()
            fired.update(pending)
            pending = {}
            part.open()
    part.store.close()
