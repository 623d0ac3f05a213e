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

import time
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
    decode_window_key,
    encode_json,
    encode_time,
    encode_utf8,
    encode_window_key,
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
# When each kept result leaves state by processing time, keyed (expiry time, key,
# window): a range read from the last sweep up to the worker's clock finds the
# results that are due. A result written again gets a later entry; the earlier one
# stays until it comes due, and RESULT_EXPIRES_AT tells the sweep it is stale.
RESULT_EXPIRY = timer_table("results.expiry")
# The expiry time of each kept result's latest write, keyed (key, window).
RESULT_EXPIRES_AT: TableSpec[tuple[str, TimeWindow], int] = TableSpec(
    "results.expires_at", encode_window_key, decode_window_key, encode_json, decode_json
)
# Each key's kept windows, oldest first (only with a per-key cap): the cap costs one
# read per kept result, never a scan of the key's results.
RESULT_WINDOWS: TableSpec[str, list[list[int]]] = TableSpec(
    "results.per_key", encode_utf8, decode_utf8, encode_json, decode_json
)
META: TableSpec[str, Any] = TableSpec("meta", encode_utf8, decode_utf8, encode_json, decode_json)
# Every table a window stage keeps (its states, for savepoints), all at version 1.
WINDOW_STATES: Mapping[str, StateSchema] = {
    name: StateSchema()
    for name in (
        *(t.name for t in (RESULTS, RESULTS_BY_WINDOW, EVENT_TIMERS, PROCESSING_TIMERS)),
        RESULT_EXPIRY.name,
        RESULT_EXPIRES_AT.name,
        RESULT_WINDOWS.name,
        META.name,
        "windows",
        "sessions",
        "keystate",
    )
}
EXPIRE = "results.expire"
# The longest results retention: a century, so a clock reading plus it stays a time.
MAX_RETENTION_MS = 100 * 365 * 86_400_000


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
        queryable: keep each result for REST queries.
        results_retention_ms: how long a kept result stays after it was last
            written, by the worker's clock (processing time): it goes at the first
            checkpoint at or after that time. Event time deletes nothing, so one
            record stamped days ahead cannot empty other keys' history.
        results_per_key: keep at most this many windows of each key, the newest
            (by window start); None keeps every window until it expires.
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
    results_per_key: int | None = None
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
        if not 1 <= self.results_retention_ms <= MAX_RETENTION_MS:
            raise ValueError(
                f"results_retention_ms must be from 1 to {MAX_RETENTION_MS} "
                f"(got {self.results_retention_ms})"
            )
        if self.results_per_key is not None and self.results_per_key < 1:
            raise ValueError(f"results_per_key must be >= 1 (got {self.results_per_key})")

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
        self._ticked = False  # whether _now_ms came from a tick yet
        self._kept = KeptResults(txn, definition.results_retention_ms, definition.results_per_key)
        self.reload()

    @property
    def watermark_ms(self) -> int:
        return self._windows.watermark_ms

    def reload(self) -> None:
        self._saved = self._store.get(META, "watermark")
        self._windows.reload(self._saved)
        self._kept.reload()

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
        self._ticked = True
        self._emit(self._windows.on_tick(now_ms), out)
        if self._d.queryable and self._kept.due(now_ms):
            self._kept.expire(now_ms)  # its deletes make the task's checkpoint due

    def prepare_commit(self) -> None:
        if self._d.queryable and self._ticked:
            self._kept.expire(self._now_ms)
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
                    self._kept.keep(result.key, result.window, kept, self._clock_ms())
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

    def _clock_ms(self) -> int:
        # The runtime and the test driver tick before any record; the wall clock is
        # a guard, so a result kept before a tick cannot get an expiry in 1970.
        return self._now_ms if self._ticked else time.time_ns() // 1_000_000


class KeptResults:
    """A window stage's results kept for queries, and when each goes.

    A result goes ``retention_ms`` after its last write by processing time, or
    when newer windows of its key push it past ``per_key``. The watermark decides
    nothing here: one record stamped days ahead cannot empty other keys' history.
    Expiry is one range read of an index keyed by expiry time, from the last sweep
    to now, so a sweep reads only what it deletes and nothing is held per result.
    """

    def __init__(self, txn: PartitionTransaction, retention_ms: int, per_key: int | None) -> None:
        self._txn = txn
        self._retention_ms = retention_ms
        self._per_key = per_key
        # Results expiring at or before this time are gone from committed state.
        self._swept_ms = MIN_WATERMARK
        # No kept result expires before this (a lower bound): a tick sweeps once the
        # clock reaches it, so an idle partition's results expire too.
        self._next_due_ms = MIN_WATERMARK

    def reload(self) -> None:
        # The index holds only results still kept, so the first sweep after opening
        # reads from its start and finds just the due ones: opening a partition
        # reads no results, and a restored one (another worker's clock wrote the
        # index) follows the same rule.
        self._swept_ms = self._next_due_ms = MIN_WATERMARK

    def due(self, now_ms: int) -> bool:
        return now_ms >= self._next_due_ms

    def keep(self, key: str, window: TimeWindow, payload: bytes, now_ms: int) -> None:
        """Keep ``payload`` (a result's record, encoded) until ``retention_ms`` after
        ``now_ms``, within the key's cap."""
        if self._per_key is not None and not self._within_cap(key, window):
            return
        expire_ms = now_ms + self._retention_ms
        # A clock set back below the last sweep: start the next sweep early enough.
        self._swept_ms = min(self._swept_ms, expire_ms - 1)
        self._next_due_ms = min(self._next_due_ms, expire_ms)
        txn = self._txn
        txn.put(RESULTS, (key, window), payload)
        txn.put(RESULTS_BY_WINDOW, (window, key), payload)
        txn.put(RESULT_EXPIRES_AT, (key, window), expire_ms)
        txn.put(RESULT_EXPIRY, Timer(expire_ms, EXPIRE, key, window.start_ms, window.end_ms), True)

    def _within_cap(self, key: str, window: TimeWindow) -> bool:
        """Add ``window`` to ``key``'s kept windows, dropping the oldest past the cap;
        False when ``window`` itself is the oldest (a late update of a window the
        cap already dropped)."""
        cap = self._per_key
        assert cap is not None
        kept = list(self._txn.get(RESULT_WINDOWS, key) or ())
        entry = [window.start_ms, window.end_ms]
        if entry in kept:
            return True
        kept.append(entry)
        kept.sort()
        dropped, kept = kept[:-cap], kept[-cap:]
        self._txn.put(RESULT_WINDOWS, key, kept)
        for start_ms, end_ms in dropped:
            self._forget(key, TimeWindow(start_ms, end_ms))
        return entry in kept

    def _forget(self, key: str, window: TimeWindow) -> None:
        """Delete a kept result (its expiry index entry goes when it comes due)."""
        self._txn.delete(RESULTS, (key, window))
        self._txn.delete(RESULTS_BY_WINDOW, (window, key))
        self._txn.delete(RESULT_EXPIRES_AT, (key, window))

    def expire(self, now_ms: int) -> None:
        """Delete the results due at ``now_ms`` (processing time)."""
        if now_ms < self._next_due_ms or now_ms <= self._swept_ms:
            return
        txn = self._txn
        lower, upper = encode_time(self._swept_ms + 1), time_upper_bound(now_ms)
        for timer, _ in list(txn.scan(RESULT_EXPIRY, lower, upper)):
            txn.delete(RESULT_EXPIRY, timer)
            key, window = timer.key, TimeWindow(timer.window_start_ms, timer.window_end_ms)
            expire_ms = txn.get(RESULT_EXPIRES_AT, (key, window))
            if expire_ms is not None and expire_ms != timer.time_ms:
                continue  # written again since: a later entry keeps it
            self._forget(key, window)
            if self._per_key is not None:
                self._uncap(key, window)
        self._swept_ms = now_ms
        following = next(iter(txn.scan(RESULT_EXPIRY, encode_time(now_ms + 1))), None)
        self._next_due_ms = MAX_TIME_MS if following is None else following[0].time_ms

    def _uncap(self, key: str, window: TimeWindow) -> None:
        kept = self._txn.get(RESULT_WINDOWS, key)
        if kept is None:
            return
        remaining = [w for w in kept if w != [window.start_ms, window.end_ms]]
        if remaining:
            self._txn.put(RESULT_WINDOWS, key, remaining)
        else:
            self._txn.delete(RESULT_WINDOWS, key)
