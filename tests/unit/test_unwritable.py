"""Values that cannot be encoded (a float sum that overflowed to infinity, an integer
past 64 bits) are one record's or one result's failure:
what caused it is dead-lettered with its reason, everything else commits, and the
state stays valid. Real tasks over real RocksDB, checkpointed and reopened as the
runtime does it (service/runtime/partitions.py); only the producer is a fake,
which hands out offsets and keeps what each committed checkpoint sent."""

from __future__ import annotations

import asyncio
import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.structs import RecordMetadata, TopicPartition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from eddy import App, BoundedOutOfOrderness, Context, Sum, Topic, Tumbling
from eddy.metrics import Metrics
from eddy.pipeline.base import Pipeline
from eddy.pipeline.windowed import RESULTS
from eddy.runtime.output import TaskOutput
from eddy.runtime.restarts import RecordFailedError, ReplayCarefully, RestartPolicy
from eddy.runtime.task import Task
from eddy.settings import RestartStrategy, Settings, build
from eddy.tables.store import PartitionStore

DEAD = "dead-letters"
SIZE_MS = 1_000


class Reading(BaseModel):
    sensor: str
    ts: int
    v: float


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class Sent:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: dict[str, str]


class Producer:
    """Resolves every send at once; ``sent`` holds what the open checkpoint sent."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.changelog = 0

    async def send(self, topic: str, value: bytes | None, **kw: Any) -> asyncio.Future[None]:
        headers = {name: raw.decode() for name, raw in kw.get("headers") or ()}
        self.sent.append(Sent(topic, kw.get("key"), value, headers))
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(1 << 20, 0, is_transactional=False)

    async def send_batch(
        self, batch: BatchBuilder, topic: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]:
        first, self.changelog = self.changelog, self.changelog + batch.record_count()
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        tp = TopicPartition(topic, partition)
        future.set_result(RecordMetadata(topic, partition, tp, first, -1, 0, 0))
        return future


class Partition:
    """One partition of ``stage`` as the runtime runs it: a task per opening; a
    checkpoint after each chunk of records; on a failure the task is discarded and
    the partition reopened from its last commit (carefully, after ReplayCarefully;
    with the record poisoned, after a deterministic RecordFailedError)."""

    def __init__(self, path: Path, stage: Pipeline, records: Sequence[Record]) -> None:
        self.store = PartitionStore(path)
        self.stage = stage
        self.records = list(records)
        self.tp = TopicPartition(stage.sources[0], 0)
        self.policy = RestartPolicy(RestartStrategy.FIXED_DELAY, 0, 3, 10, 60_000)
        self.producer = Producer()
        self.committed: list[Sent] = []
        self.offset = 0
        self.careful: dict[TopicPartition, int] | None = None
        self.openings = 0
        self.delays_s: list[float] = []  # before each reopening for a failed record

    def open(self) -> Task:
        self.openings += 1
        careful = self.careful
        if careful is not None and self.offset >= careful[self.tp]:
            careful = self.careful = None
        return Task(
            pipeline=self.stage,
            partition=0,
            store=self.store,
            producer=self.producer,
            exactly_once=False,
            changelog_topic="changelog",
            output=TaskOutput(self.stage.name, DEAD, Metrics()),
            offsets={self.tp: self.offset},
            restarts=self.policy,
            careful_until=careful,
        )

    async def run(self, chunks: Callable[[int], int]) -> None:
        """Process every record; ``chunks(offset)`` is how many go into the
        checkpoint that starts at ``offset``."""
        while self.offset < len(self.records):
            assert self.openings < 4 * len(self.records) + 10, "no progress"
            task = self.open()
            try:
                while self.offset < len(self.records):
                    end = self.offset + chunks(self.offset)
                    await task.process(self.tp, self.records[self.offset : end])
                    await task.prepare_commit()
                    task.finish_commit()
                    self.committed += self.producer.sent
                    self.producer.sent = []
                    self.offset = task.committed_offsets[self.tp]
            except ReplayCarefully as failure:
                until = {**task.next_offsets}
                for tp, offset in failure.until.items():
                    until[tp] = max(until.get(tp, 0), offset)
                self.careful = until
                self.abort(task)
            except RecordFailedError as failure:
                if not failure.deterministic:
                    raise
                self.delays_s.append(self.policy.on_failure(failure))
                self.abort(task)

    def abort(self, task: Task) -> None:
        task.discard()
        self.producer.sent = []  # the transaction aborts

    def dead(self) -> list[Sent]:
        return [s for s in self.committed if s.topic == DEAD]

    def outputs(self, topic: str) -> list[dict[str, Any]]:
        return [orjson.loads(s.value or b"") for s in self.committed if s.topic == topic]


def settings_() -> Settings:
    return build(Settings, {"app_id": "unwritable"})


def window_sums(
    aggregate: Any = None, *, queryable: bool = False, to: bool = True
) -> tuple[Pipeline, str]:
    app = App("unwritable")
    readings = Topic("readings", Reading, key="sensor", timestamp="ts")
    stream = (
        app.stream(readings, name="sums", watermark=BoundedOutOfOrderness(bound_ms=0))
        .window(Tumbling(size_ms=SIZE_MS))
        .aggregate(aggregate or Sum("v"))
    )
    if to:
        stream = stream.to(Topic("sums"))
    if queryable:
        stream.queryable()
    settings = settings_()
    return app.build(settings).stages[0], settings.topic("sums")


def readings(stage: Pipeline, rows: Sequence[tuple[str, int, float]]) -> list[Record]:
    topic = stage.sources[0]
    return [
        Record(topic, 0, n, ts, s.encode(), orjson.dumps({"sensor": s, "ts": ts, "v": v}))
        for n, (s, ts, v) in enumerate(rows)
    ]


def run(partition: Partition, chunks: Callable[[int], int] = lambda _: 1_000) -> Partition:
    asyncio.run(partition.run(chunks))
    return partition


def oracle(rows: Sequence[tuple[str, int, float]]) -> tuple[list[int], dict[int, float]]:
    """The readings dead-lettered (their sum would overflow) and each closed
    window's sum, one sensor, processed in order."""
    dead: list[int] = []
    sums: dict[int, float] = {}
    for offset, (_, ts, v) in enumerate(rows):
        start = ts - ts % SIZE_MS
        total = sums.get(start, 0.0) + v
        if math.isfinite(total):
            sums[start] = total
        else:
            dead.append(offset)
    closed = max(ts for _, ts, _ in rows) - 1  # bound 0: the watermark
    return dead, {start: s for start, s in sums.items() if start + SIZE_MS - 1 <= closed}


def test_a_reading_that_overflows_its_windows_sum_is_dead_lettered_with_the_reason(
    tmp_path: Path,
) -> None:
    stage, sums = window_sums()
    rows = [("s1", 100, 1e308), ("s1", 200, 1e308), ("s2", 300, 5.0), ("s1", 5_000, 1.0)]
    partition = run(Partition(tmp_path / "p0", stage, readings(stage, rows)))

    [dead] = partition.dead()
    assert orjson.loads(dead.value or b"") == {"sensor": "s1", "ts": 200, "v": 1e308}
    assert dead.headers["eddy.source.offset"] == "1"
    reason = dead.headers["eddy.reason"]
    assert reason.startswith("the state it changed cannot be written: table 'windows'")
    assert reason.endswith("NaN or infinity (an overflow?)"), reason
    assert "\n" not in reason
    assert len(reason) < 500
    got = {(r["sensor"], r["window_start_ms"]): r["value"] for r in partition.outputs(sums)}
    assert got == {("s1", 0): 1e308, ("s2", 0): 5.0}  # the state stayed valid
    # Found in two reopenings, at once: one to replay carefully, one to dead-letter it.
    assert partition.openings == 3
    assert partition.delays_s == [0.0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(st.sampled_from([1.5, 1e308, -1e308, 9e307]), min_size=1, max_size=24),
    gaps=st.lists(st.integers(0, 700), min_size=24, max_size=24),
    chunk=st.integers(1, 9),
)
def test_wherever_the_checkpoints_fall_the_same_readings_are_dead_lettered(
    values: list[float], gaps: list[int], chunk: int
) -> None:
    stage, sums = window_sums()
    rows, ts = [], 0
    for value, gap in zip(values, gaps, strict=False):
        ts += gap
        rows.append(("s1", ts, value))
    rows.append(("s1", ts + 10 * SIZE_MS, 0.0))  # closes every window
    dead, expected = oracle(rows)
    with tempfile.TemporaryDirectory() as tmp:
        partition = run(Partition(Path(tmp) / "p0", stage, readings(stage, rows)), lambda _: chunk)
        got_dead = [int(s.headers["eddy.source.offset"]) for s in partition.dead()]
        got = {r["window_start_ms"]: r["value"] for r in partition.outputs(sums)}
        partition.store.close()
    assert got_dead == dead
    assert got == expected


class TimesAlot:
    """An aggregate whose result overflows where its accumulator does not."""

    def create(self) -> float:
        return 0.0

    def add(self, value: Reading, accumulator: float) -> float:
        return accumulator + value.v

    def merge(self, left: float, right: float) -> float:
        return left + right

    def result(self, accumulator: float) -> float:
        return accumulator * 1e300


@pytest.mark.parametrize("queryable", [False, True])
def test_a_result_that_cannot_be_encoded_is_dead_lettered_with_its_key_and_window(
    tmp_path: Path, queryable: bool
) -> None:
    stage, sums = window_sums(TimesAlot(), queryable=queryable, to=not queryable)
    rows = [("a", 100, 1.0), ("b", 200, 1e10), ("a", 1_100, 2.0), ("a", 9_000, 0.0)]
    partition = run(Partition(tmp_path / "p0", stage, readings(stage, rows)))

    [dead] = partition.dead()
    assert dead.key == b"b"
    assert dead.headers["eddy.key"] == "b"
    assert (dead.headers["eddy.window_start_ms"], dead.headers["eddy.window_end_ms"]) == (
        "0",
        "1000",
    )
    assert dead.headers["eddy.reason"].startswith("the result cannot be written: ")
    assert dead.headers["eddy.reason"].endswith("NaN or infinity (an overflow?)")
    assert dead.value == b"1e+310" or dead.value == b"inf"  # its repr: no bytes exist for it
    if queryable:
        assert "eddy.output.topic" not in dead.headers
        kept = {(k, w.start_ms): r["value"] for (k, w), r in partition.store.scan(RESULTS)}
        assert kept == {("a", 0): 1e300, ("a", 1_000): 2e300}
    else:
        assert dead.headers["eddy.output.topic"] == sums
        got = {(r["sensor"], r["window_start_ms"]): r["value"] for r in partition.outputs(sums)}
        assert got == {("a", 0): 1e300, ("a", 1_000): 2e300}
    # No record is blamed for it: every reading's effect committed.
    assert not [s for s in partition.dead() if "eddy.source.offset" in s.headers]


def test_a_process_functions_output_that_cannot_be_encoded_is_dead_lettered(
    tmp_path: Path,
) -> None:
    app = App("unwritable")
    source = Topic("readings", Reading, key="sensor", timestamp="ts")
    counts = Topic("counts")

    def huge(reading: Reading, ctx: Context) -> None:
        ctx.output({"sensor": reading.sensor, "v": 2**70 if reading.v == 7 else reading.v})

    app.stream(source, name="huge").process(huge).to(counts)
    settings = settings_()
    stage, topic = app.build(settings).stages[0], settings.topic("counts")
    rows = [("a", 1, 1.0), ("a", 2, 7.0), ("b", 3, 3.0)]
    partition = run(Partition(tmp_path / "p0", stage, readings(stage, rows)))

    [dead] = partition.dead()
    assert dead.headers["eddy.key"] == "a"
    assert dead.headers["eddy.output.topic"] == topic
    assert "window_start_ms" not in str(dead.headers)
    assert dead.headers["eddy.reason"].startswith("the result cannot be written: ")
    assert dead.value == repr({"sensor": "a", "v": 2**70}).encode()  # its repr
    assert partition.outputs(topic) == [{"sensor": "a", "v": 1.0}, {"sensor": "b", "v": 3.0}]


def test_a_deterministic_failure_poisons_at_once_and_counts_no_restart() -> None:
    from eddy.tables.store import UnwritableStateError

    policy = RestartPolicy(RestartStrategy.NONE, 1_000, 3, 1, 60_000)
    failure = RecordFailedError(("in", 0, 5), UnwritableStateError("table 't', key 'k': inf"))
    assert policy.on_failure(failure) == 0.0  # strategy 'none' would have stopped the worker
    assert policy.poisoned == {
        ("in", 0, 5): "the state it changed cannot be written: table 't', key 'k': inf"
    }
