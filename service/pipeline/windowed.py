"""Keyed event-time window aggregation as a pipeline.

Decode -> key and timestamp -> window operator -> results to a topic and to a
queryable results table. Late records go to a late topic, undecodable ones to
the dead-letter topic. Watermarks are per input partition and advance after
every record, so a replay after a failure judges lateness exactly as the first
run did (periodic watermarks would depend on batch timing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel

from service.eventtime import (
    AggregateFunction,
    Timer,
    TimerQueue,
    WindowAssigner,
    WindowOperator,
    WindowResult,
    WindowSpec,
)
from service.eventtime.watermarks import WatermarkStrategy
from service.pipeline.base import InputRecord, Output
from service.records import DecodeError, decode_model
from tables.codecs import decode_json, decode_utf8, encode_json, encode_utf8
from tables.store import PartitionStore, PartitionTransaction, TableSpec
from tables.windows import (
    StoredTimers,
    StoredWindowState,
    WindowKey,
    results_table,
    timer_table,
    window_table,
)

WINDOWS = window_table("windows")
TIMERS = timer_table("timers")
RESULTS = results_table("results")
RESULT_EXPIRY = timer_table("results.expiry")
META: TableSpec[str, Any] = TableSpec("meta", encode_utf8, decode_utf8, encode_json, decode_json)
EXPIRE = "results.expire"


@dataclass(frozen=True)
class EventTime:
    """How to read a record's key and event time, and how its watermark advances."""

    key: Callable[[Any], str]
    timestamp_ms: Callable[[Any], int]
    watermark: WatermarkStrategy


def default_format(result: WindowResult, key_field: str) -> dict[str, Any]:
    return {
        key_field: result.key,
        "window_start_ms": result.window.start_ms,
        "window_end_ms": result.window.end_ms,
        **result.value,
        "timing": result.timing,
    }


@dataclass(frozen=True)
class WindowedAggregation:
    """A complete windowed-aggregation pipeline definition."""

    name: str
    source: str
    value_type: type[BaseModel]
    event_time: EventTime
    assigner: WindowAssigner
    aggregate: AggregateFunction[Any, Any, Any]
    sink: str
    late_output: str | None = None
    allowed_lateness_ms: int = 0
    key_field: str = "key"
    results_retention_ms: int = 86_400_000
    window_spec: WindowSpec = field(init=False)

    def __post_init__(self) -> None:
        spec = WindowSpec(self.assigner, self.aggregate, self.allowed_lateness_ms)
        object.__setattr__(self, "window_spec", spec)

    @property
    def sources(self) -> Sequence[str]:
        return (self.source,)

    @property
    def output_topics(self) -> Sequence[str]:
        return (self.sink,) if self.late_output is None else (self.sink, self.late_output)

    def create_logic(
        self, partition: int, store: PartitionStore, txn: PartitionTransaction
    ) -> WindowedLogic:
        return WindowedLogic(self, store, txn)

    def format(self, result: WindowResult) -> dict[str, Any]:
        return default_format(result, self.key_field)


class WindowedLogic:
    """:class:`service.pipeline.base.PartitionLogic` of a :class:`WindowedAggregation`."""

    def __init__(
        self, definition: WindowedAggregation, store: PartitionStore, txn: PartitionTransaction
    ) -> None:
        self._d = definition
        self._store = store
        self._txn = txn
        self._timers = TimerQueue(StoredTimers(store, txn, TIMERS))
        self._expiry = TimerQueue(StoredTimers(store, txn, RESULT_EXPIRY))
        self._operator = WindowOperator(
            definition.window_spec, StoredWindowState(txn, WINDOWS), self._timers
        )
        self._generator = definition.event_time.watermark.create()
        self._saved_watermark: dict[str, Any] | None = None
        self.reload()

    @property
    def watermark_ms(self) -> int:
        return self._operator.watermark_ms

    def reload(self) -> None:
        self._timers.reload()
        self._expiry.reload()
        self._generator = self._d.event_time.watermark.create()
        self._saved_watermark = self._store.get(META, "watermark")
        if self._saved_watermark is not None:
            self._generator.restore(self._saved_watermark)
        # The committed watermark already fired its windows; only set the clock.
        self._operator.watermark_ms = self._generator.watermark_ms

    def process(self, record: InputRecord, out: Output) -> None:
        try:
            value = decode_model(self._d.value_type, record.value)
        except DecodeError as exc:
            out.dead_letter(record, exc.reason)
            return
        try:
            key = self._d.event_time.key(value)
            timestamp_ms = self._d.event_time.timestamp_ms(value)
        except Exception as exc:  # a user function failed on this record: keep the record
            out.dead_letter(record, f"key/timestamp extraction failed: {exc!r}")
            return
        if type(timestamp_ms) is not int or type(key) is not str:
            out.dead_letter(record, "key must be a str and timestamp_ms an int")
            return
        accepted, updates = self._operator.process(key, timestamp_ms, value)
        if not accepted:
            out.count("late")
            if self._d.late_output is not None:
                headers = (("eddy.watermark_ms", str(self._operator.watermark_ms).encode()),)
                out.send(self._d.late_output, record.key, record.value, headers, timestamp_ms)
        self._emit(updates, out)
        self._generator.on_event(timestamp_ms)
        watermark_ms = self._generator.watermark_ms
        if watermark_ms > self._operator.watermark_ms:
            self._emit(self._operator.advance(watermark_ms), out)
            for timer in self._expiry.pop_due(watermark_ms):
                self._txn.delete(RESULTS, _window_key(timer))

    def prepare_commit(self) -> None:
        snapshot = self._generator.snapshot()
        if snapshot != self._saved_watermark:
            self._txn.put(META, "watermark", snapshot)
            self._saved_watermark = snapshot

    def _emit(self, results: list[WindowResult], out: Output) -> None:
        for result in results:
            payload = self._d.format(result)
            out.send(
                self._d.sink,
                result.key.encode(),
                orjson.dumps(payload),
                timestamp_ms=result.window.max_timestamp_ms,
            )
            out.count(f"window.{result.timing}")
            self._txn.put(RESULTS, (result.key, result.window), payload)
            start, end = result.window
            expire_ms = end + self._d.results_retention_ms
            self._expiry.register(Timer(expire_ms, EXPIRE, result.key, start, end))


def _window_key(timer: Timer) -> WindowKey:
    from service.eventtime import TimeWindow

    return timer.key, TimeWindow(timer.window_start_ms, timer.window_end_ms)
