"""Keyed event-time window aggregation as a pipeline.

Decode -> key and timestamp -> :class:`service.eventtime.keyed.KeyedWindows` ->
results to a topic and to a queryable results table. Late records go to a late
topic, undecodable ones to the dead-letter topic. The watermark is per input
partition and, by default, advances after every record, so a replay after a
failure judges lateness exactly as the first run did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel

from service.eventtime import Timer, TimerQueue, TimeWindow, WindowResult, WindowSpec
from service.eventtime.joins import tag
from service.eventtime.keyed import KeyedWindows
from service.eventtime.watermarks import WatermarkStrategy
from service.eventtime.windows import MAX_TIME_MS
from service.pipeline.base import InputRecord, Output
from service.pipeline.keyed import Input
from service.pipeline.markers import marker_of
from service.records import DecodeError, decode_model
from tables.codecs import decode_json, decode_utf8, encode_json, encode_utf8
from tables.schema import StateSchema
from tables.store import PartitionStore, PartitionTransaction, TableSpec
from tables.windows import (
    StoredTimers,
    StoredWindowState,
    results_by_window_table,
    results_table,
    timer_table,
)

RESULTS = results_table("results")
RESULTS_BY_WINDOW = results_by_window_table("results.by_window")
EVENT_TIMERS = timer_table("timers")
PROCESSING_TIMERS = timer_table("timers.processing")
RESULT_EXPIRY = timer_table("results.expiry")
META: TableSpec[str, Any] = TableSpec("meta", encode_utf8, decode_utf8, encode_json, decode_json)
# Every table a window pipeline keeps (its states, for savepoints), all at version 1.
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


@dataclass(frozen=True)
class EventTime:
    """How to read a record's key and event time, and how its watermark advances."""

    key: Callable[[Any], str]
    timestamp_ms: Callable[[Any], int]
    watermark: WatermarkStrategy


def default_format(result: WindowResult, key_field: str) -> dict[str, Any]:
    value = result.value if isinstance(result.value, dict) else {"value": result.value}
    return {
        key_field: result.key,
        "window_start_ms": result.window.start_ms,
        "window_end_ms": result.window.end_ms,
        **value,
        "timing": result.timing,
    }


@dataclass(frozen=True)
class Decoder:
    """How one input's records become window elements."""

    value_type: type[BaseModel]
    key: Callable[[Any], str]
    timestamp_ms: Callable[[Any], int]
    side: int | None = None  # for window joins: which side elements are tagged with


@dataclass(frozen=True)
class WindowedAggregation:
    """A complete windowed-aggregation pipeline definition."""

    name: str
    source: str
    value_type: type[BaseModel]
    event_time: EventTime
    window: WindowSpec
    sink: str
    late_output: str | None = None
    key_field: str = "key"
    results_retention_ms: int = 86_400_000
    # Shapes each result's JSON; by default {key_field, window bounds, value, timing}.
    formatter: Callable[[WindowResult], dict[str, Any]] | None = None

    @property
    def state_schemas(self) -> Mapping[str, StateSchema]:
        return WINDOW_STATES

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
        if self.formatter is not None:
            return self.formatter(result)
        return default_format(result, self.key_field)

    @property
    def watermark(self) -> WatermarkStrategy:
        return self.event_time.watermark

    def decoders(self) -> dict[str, Decoder]:
        t = self.event_time
        return {self.source: Decoder(self.value_type, t.key, t.timestamp_ms)}


@dataclass(frozen=True)
class WindowJoin:
    """Two co-partitioned inputs in the same windows (semantics F.2): on firing, the
    window's function sees both sides' elements, tagged ``{"side", "value"}`` (see
    :func:`service.eventtime.joins.window_join` / ``window_cogroup``)."""

    name: str
    left: Input
    right: Input
    watermark: WatermarkStrategy  # e.g. PerInput({left: ..., right: ...})
    window: WindowSpec
    sink: str
    key_field: str = "key"
    results_retention_ms: int = 86_400_000
    late_output: str | None = None

    @property
    def state_schemas(self) -> Mapping[str, StateSchema]:
        return WINDOW_STATES

    @property
    def sources(self) -> Sequence[str]:
        return (self.left.topic, self.right.topic)

    @property
    def output_topics(self) -> Sequence[str]:
        return (self.sink,) if self.late_output is None else (self.sink, self.late_output)

    def create_logic(
        self, partition: int, store: PartitionStore, txn: PartitionTransaction
    ) -> WindowedLogic:
        return WindowedLogic(self, store, txn)

    def format(self, result: WindowResult) -> dict[str, Any]:
        return default_format(result, self.key_field)

    def decoders(self) -> dict[str, Decoder]:
        decoders = {}
        for side, source in enumerate((self.left, self.right)):
            if source.timestamp_ms is None:
                raise ValueError(f"{self.name}: input {source.topic} needs a timestamp_ms")
            decoders[source.topic] = Decoder(
                source.value_type, source.key, source.timestamp_ms, side
            )
        return decoders


Windowed = WindowedAggregation | WindowJoin


class WindowedLogic:
    """:class:`service.pipeline.base.PartitionLogic` of a :class:`WindowedAggregation`."""

    def __init__(
        self, definition: Windowed, store: PartitionStore, txn: PartitionTransaction
    ) -> None:
        self._d = definition
        self._store = store
        self._txn = txn
        self._decoders = definition.decoders()
        self._expiry = TimerQueue(StoredTimers(store, txn, RESULT_EXPIRY))
        self._windows = KeyedWindows(
            definition.window,
            watermark=definition.watermark,
            state=StoredWindowState(txn),
            event_timers=StoredTimers(store, txn, EVENT_TIMERS),
            processing_timers=StoredTimers(store, txn, PROCESSING_TIMERS),
            inputs=tuple(definition.sources),
        )
        # Elements kept for a process function or an evictor are stored as JSON.
        self._store_elements = not definition.window.incremental
        self._saved: dict[str, Any] | None = None
        self._now_ms = 0  # processing time, as of the runtime's last tick
        self.reload()

    @property
    def watermark_ms(self) -> int:
        return self._windows.watermark_ms

    def reload(self) -> None:
        self._expiry.reload()
        self._saved = self._store.get(META, "watermark")
        self._windows.reload(self._saved)

    def process(self, record: InputRecord, out: Output) -> None:
        marker = marker_of(record)
        if marker is not None:
            self._emit(self._windows.on_marker(*marker, self._now_ms), out)
            return
        decoder = self._decoders[record.topic]
        try:
            value = decode_model(decoder.value_type, record.value)
        except DecodeError as exc:
            out.dead_letter(record, exc.reason)
            return
        try:
            key = decoder.key(value)
            timestamp_ms = decoder.timestamp_ms(value)
        except Exception as exc:  # a user function failed on this record: keep the record
            out.dead_letter(record, f"key/timestamp extraction failed: {exc!r}")
            return
        if type(timestamp_ms) is not int or type(key) is not str:
            out.dead_letter(record, "key must be a str and timestamp_ms an int")
            return
        element: Any = value
        if self._store_elements or decoder.side is not None:
            element = value.model_dump(mode="json")
        if decoder.side is not None:
            element = tag(decoder.side, element)
        results, late = self._windows.on_record(
            key, timestamp_ms, element, self._now_ms, record.topic
        )
        if late:
            out.count("late")
            if self._d.late_output is not None:
                headers = (("eddy.watermark_ms", str(self.watermark_ms).encode()),)
                out.send(self._d.late_output, record.key, record.value, headers, timestamp_ms)
        self._emit(results, out)

    def on_tick(self, now_ms: int, out: Output) -> None:
        """Processing time passed: periodic watermarks, idleness, processing-time timers."""
        self._now_ms = now_ms
        self._emit(self._windows.on_tick(now_ms), out)

    def prepare_commit(self) -> None:
        snapshot = self._windows.snapshot()
        if snapshot != self._saved:
            self._txn.put(META, "watermark", snapshot)
            self._saved = snapshot

    def _emit(self, results: list[WindowResult], out: Output) -> None:
        for result in results:
            payload = self._d.format(result)
            # A result carries its window's last instant as its Kafka timestamp, as
            # Flink's sinks do; a global window has none, so the producer sets it.
            end = result.window.end_ms
            timestamp_ms = None if end >= MAX_TIME_MS else result.window.max_timestamp_ms
            out.send(self._d.sink, result.key.encode(), orjson.dumps(payload), (), timestamp_ms)
            out.count(f"window.{result.timing}")
            self._txn.put(RESULTS, (result.key, result.window), payload)
            self._txn.put(RESULTS_BY_WINDOW, (result.window, result.key), payload)
            expire_ms = end + self._d.results_retention_ms
            self._expiry.register(Timer(expire_ms, EXPIRE, result.key, result.window.start_ms, end))
        for timer in self._expiry.pop_due(self.watermark_ms):
            window = TimeWindow(timer.window_start_ms, timer.window_end_ms)
            self._txn.delete(RESULTS, (timer.key, window))
            self._txn.delete(RESULTS_BY_WINDOW, (window, timer.key))
