"""Keyed event-time windows as a stage: an aggregation, or a window join.

Each input's records become keyed elements (:mod:`eddy.pipeline.source`);
:class:`eddy.eventtime.keyed.KeyedWindows` assigns them to windows and fires
them when the watermark passes; each result goes to the output topics, and to a
queryable results table when the agent asked for one. Late records go to the
late topic with their original bytes. The watermark is per input partition and
advances after every record, so a replay after a failure judges lateness
exactly as the first run did.

With two inputs (a window join), elements are tagged with their side and the
window's function sees both sides' elements of one key and window.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel

from eddy.eventtime import Timer, TimeWindow, WindowResult, WindowSpec
from eddy.eventtime.joins import tag
from eddy.eventtime.keyed import KeyedWindows
from eddy.eventtime.watermarks import MIN_WATERMARK, WatermarkStrategy
from eddy.eventtime.windows import MAX_TIME_MS
from eddy.pipeline.base import UNWRITABLE, InputRecord, Output, Target, unwritable_reason
from eddy.pipeline.markers import marker_of
from eddy.pipeline.source import Source
from eddy.tables.codecs import (
    decode_json,
    decode_utf8,
    encode_json,
    encode_time,
    encode_utf8,
    time_upper_bound,
)
from eddy.tables.schema import StateSchema
from eddy.tables.store import PartitionStore, PartitionTransaction, TableSpec
from eddy.tables.windows import (
    StoredTimers,
    StoredWindowState,
    results_by_window_table,
    results_table,
    timer_table,
)


def _encoded_when_kept(value: Any) -> bytes:
    """A kept result is encoded once, when emitted (:meth:`WindowedLogic._emit`): one
    that cannot be is dead-lettered there, with its key and window, rather than
    failing the checkpoint; and both tables store the same bytes."""
    return value if isinstance(value, bytes) else encode_json(value)


# Values: a result's record (a dict) as read back, its encoding when kept.
RESULTS: TableSpec[tuple[str, TimeWindow], Any] = replace(
    results_table("results"), encode_value=_encoded_when_kept
)
RESULTS_BY_WINDOW: TableSpec[tuple[TimeWindow, str], Any] = replace(
    results_by_window_table("results.by_window"), encode_value=_encoded_when_kept
)
EVENT_TIMERS = timer_table("timers")
PROCESSING_TIMERS = timer_table("timers.processing")
# When each kept result leaves state, keyed (expiry time, key, window): a range read
# from the last sweep up to the watermark finds exactly the results that are due.
RESULT_EXPIRY = timer_table("results.expiry")
META: TableSpec[str, Any] = TableSpec("meta", encode_utf8, decode_utf8, encode_json, decode_json)
# Every table a window stage keeps (its states, for savepoints), all at version 1.
WINDOW_STATES: Mapping[str, StateSchema] = {
    name: StateSchema()
    for name in (
        *(t.name for t in (RESULTS, RESULTS_BY_WINDOW, EVENT_TIMERS, PROCESSING_TIMERS)),
        RESULT_EXPIRY.name,
        META.name,
        "windows",
        "sessions",
        "keystate",
    )
}
EXPIRE = "results.expire"


def window_record(result: WindowResult, key_field: str) -> dict[str, Any]:
    """A result as a record: ``{key_field, window_start_ms, window_end_ms, ...value,
    timing}``; a value that is not a mapping sits under ``value``."""
    value = result.value
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    fields = value if isinstance(value, dict) else {"value": value}
    return {
        key_field: result.key,
        "window_start_ms": result.window.start_ms,
        "window_end_ms": result.window.end_ms,
        **fields,
        "timing": result.timing,
    }


@dataclass(frozen=True)
class WindowedAggregation:
    """A window stage definition.

    Attributes:
        inputs: one source, or two for a window join (co-partitioned).
        outputs: where results go; a target's steps get each :class:`WindowResult`
            (a target without steps gets :func:`window_record`).
        queryable: keep each result for REST queries for ``results_retention_ms``
            of event time after its window ends (they go at the first checkpoint
            whose watermark has reached that time).
        revive: turns a stored element back into its type (windows that keep
            their elements: a process function or an evictor).
    """

    name: str
    inputs: tuple[Source, ...]
    watermark: WatermarkStrategy
    window: WindowSpec
    outputs: tuple[Target, ...] = ()
    late_output: str | None = None
    key_field: str = "key"
    queryable: bool = False
    results_retention_ms: int = 86_400_000
    revive: Callable[[Any], Any] | None = None
    # Aligned windows (tumbling, sliding) of every key close at one watermark: a
    # million keys would put a million results, their state writes and changelog
    # records into one transaction, in memory at once. Past this many, the runtime
    # checkpoints and fires the rest before the next record (Task.fire_due), so
    # nothing but transaction boundaries changes.
    firings_per_checkpoint: int = 10_000

    def __post_init__(self) -> None:
        if not 1 <= len(self.inputs) <= 2:
            raise ValueError("a window stage has one input, or two (a window join)")

    @property
    def state_schemas(self) -> Mapping[str, StateSchema]:
        return WINDOW_STATES

    @property
    def sources(self) -> Sequence[str]:
        return tuple(source.topic for source in self.inputs)

    @property
    def output_topics(self) -> Sequence[str]:
        topics = [t.topic for t in self.outputs]
        if self.late_output is not None:
            topics.append(self.late_output)
        return tuple(dict.fromkeys(topics))

    def create_logic(
        self, partition: int, store: PartitionStore, txn: PartitionTransaction
    ) -> WindowedLogic:
        return WindowedLogic(self, store, txn)


class WindowedLogic:
    """:class:`eddy.pipeline.base.PartitionLogic` of a :class:`WindowedAggregation`."""

    def __init__(
        self, definition: WindowedAggregation, store: PartitionStore, txn: PartitionTransaction
    ) -> None:
        self._d = definition
        self._store = store
        self._txn = txn
        self._sources = {source.topic: (n, source) for n, source in enumerate(definition.inputs)}
        self._joined = len(definition.inputs) > 1
        revive = None if definition.window.incremental else definition.revive
        self._windows = KeyedWindows(
            definition.window,
            watermark=definition.watermark,
            state=StoredWindowState(txn, revive=revive),
            event_timers=StoredTimers(txn, EVENT_TIMERS),
            processing_timers=StoredTimers(txn, PROCESSING_TIMERS),
            inputs=tuple(definition.sources),
        )
        self._windows.operator.firing_limit = definition.firings_per_checkpoint
        # KeyedWindows.on_element without its frame: ``(accepted, results)`` per element.
        self._process_element = self._windows.operator.process_element
        # Whether a result is needed as a record (kept for queries, or sent as is).
        self._records = definition.queryable or any(t.steps is None for t in definition.outputs)
        self._saved: dict[str, Any] | None = None
        self._now_ms = 0  # processing time, as of the runtime's last tick
        # Results expiring at or before this time are gone from committed state.
        self._swept_ms = MIN_WATERMARK
        self.reload()

    @property
    def watermark_ms(self) -> int:
        return self._windows.watermark_ms

    def reload(self) -> None:
        self._saved = self._store.get(META, "watermark")
        self._windows.reload(self._saved)
        # Every checkpoint sweeps the results due at its watermark (and so did Eddy
        # before the sweep moved here), so the committed watermark is where the
        # next sweep starts: opening a partition reads no results.
        self._swept_ms = self.watermark_ms

    def process(self, record: InputRecord, out: Output) -> None:
        marker = marker_of(record)
        if marker is not None:
            self._emit(self._windows.on_marker(*marker, self._now_ms), out)
            return
        side, source = self._sources[record.topic]
        read = source.read(record, out)
        if read is None:
            return
        timestamp_ms = read.timestamp_ms
        process = self._process_element
        late = False
        for key, value in read.elements:
            element = tag(side, value) if self._joined else value
            accepted, results = process(key, timestamp_ms, element)
            late = late or not accepted
            if results:
                self._emit(results, out)
        if late:
            self._late(record, timestamp_ms, out)
        fired = self._windows.observe(record.topic, timestamp_ms, read.value, self._now_ms)
        if fired:
            self._emit(fired, out)

    def advance_watermark(self, watermark_ms: int, out: Output) -> None:
        """An explicit watermark (the test driver's, or the end of input)."""
        self._emit(self._windows.on_watermark(watermark_ms), out)
        while self.firing_due:  # no runtime here to checkpoint in between
            self.fire_due(out)

    @property
    def firing_due(self) -> bool:
        """A watermark fired the first ``firings_per_checkpoint`` windows it closed;
        more are due."""
        return self._windows.operator.firing_due

    def fire_due(self, out: Output) -> None:
        self._emit(self._windows.fire_due(), out)

    def _late(self, record: InputRecord, timestamp_ms: int, out: Output) -> None:
        out.count("late")
        if self._d.late_output is not None:
            headers = (("eddy.watermark_ms", str(self.watermark_ms).encode()),)
            out.send(self._d.late_output, record.key, record.value, headers, timestamp_ms)

    def on_tick(self, now_ms: int, out: Output) -> None:
        """Processing time passed: periodic watermarks, idleness, processing-time timers."""
        self._now_ms = now_ms
        self._emit(self._windows.on_tick(now_ms), out)

    def prepare_commit(self) -> None:
        if self._d.queryable:
            self._expire()
        snapshot = self._windows.snapshot()
        if snapshot != self._saved:
            self._txn.put(META, "watermark", snapshot)
            self._saved = snapshot

    def _emit(self, results: list[WindowResult], out: Output) -> None:
        # A watermark may close every key's window at once (aligned windows): the
        # per-result work here is what a burst of closings waits for, so the record
        # is built once for the outputs and the kept copy, and counted per timing.
        # A result that cannot be encoded (a sum that overflowed to infinity) is
        # dead-lettered with its key and window, and the others go on.
        timings: dict[str, int] = {}
        d = self._d
        for result in results:
            record = window_record(result, d.key_field) if self._records else None
            if d.outputs:
                self._send(result, record, out)
            if d.queryable:
                assert record is not None  # built for every result of a queryable stage
                try:
                    kept = encode_json(record)
                except UNWRITABLE as exc:
                    self._unwritable(None, result, exc, out)
                else:
                    self._keep(result, kept)
            timings[result.timing] = timings.get(result.timing, 0) + 1
        for timing, count in timings.items():
            out.count(f"window.{timing}", count)

    def _send(self, result: WindowResult, record: dict[str, Any] | None, out: Output) -> None:
        # A result carries its window's last instant as its Kafka timestamp, as
        # Flink's sinks do; a global window has none, so the producer sets it.
        end = result.window.end_ms
        timestamp_ms = None if end >= MAX_TIME_MS else result.window.max_timestamp_ms
        for target in self._d.outputs:
            try:
                key = target.key(result.key)
                # ``record`` is built whenever a target has no steps (``_records``).
                encoded = (
                    target.write(result) if target.steps is not None else [target.encode(record)]
                )
            except UNWRITABLE as exc:
                self._unwritable(target.topic, result, exc, out)
                continue
            for data in encoded:
                out.send(target.topic, key, data, (), timestamp_ms)

    @staticmethod
    def _unwritable(
        topic: str | None, result: WindowResult, exc: BaseException, out: Output
    ) -> None:
        window = (result.window.start_ms, result.window.end_ms)
        out.dead_letter_output(topic, result.key, result.value, unwritable_reason(exc), window)

    def _keep(self, result: WindowResult, payload: bytes) -> None:
        """Keep ``payload`` (the result's record, encoded) for queries."""
        key, window = result.key, result.window
        expire_ms = window.end_ms + self._d.results_retention_ms
        if expire_ms <= self._swept_ms:
            # Due before the last sweep (an update long after its window): no later
            # sweep would find it, and it would already be gone. So is an earlier one.
            self._txn.delete(RESULTS, (key, window))
            self._txn.delete(RESULTS_BY_WINDOW, (window, key))
            return
        self._txn.put(RESULTS, (key, window), payload)
        self._txn.put(RESULTS_BY_WINDOW, (window, key), payload)
        timer = Timer(expire_ms, EXPIRE, key, window.start_ms, window.end_ms)
        self._txn.put(RESULT_EXPIRY, timer, True)

    def _expire(self) -> None:
        """Delete the results due at the watermark: one range read of the expiry
        index from the last sweep, so the cost is the results that expire, and no
        per-result timer is held in memory."""
        watermark_ms = self.watermark_ms
        if watermark_ms <= self._swept_ms:
            return
        lower, upper = encode_time(self._swept_ms + 1), time_upper_bound(watermark_ms)
        for timer, _ in list(self._txn.scan(RESULT_EXPIRY, lower, upper)):
            window = TimeWindow(timer.window_start_ms, timer.window_end_ms)
            self._txn.delete(RESULTS, (timer.key, window))
            self._txn.delete(RESULTS_BY_WINDOW, (window, timer.key))
            self._txn.delete(RESULT_EXPIRY, timer)
        self._swept_ms = watermark_ms
