"""Process-function pipelines: a (co-)process function over one or two keyed,
co-partitioned inputs, optionally with a broadcast (control) input.

The runtime decodes each record with its input's model, extracts key and event
time, and calls the function through :class:`service.eventtime.process.
ProcessOperator`; keyed state, timers and the watermark live in the partition's
RocksDB store, and everything a function emits commits with the input offsets.
Functions receive records as plain dicts (the validated model, dumped to JSON
types), exactly as the replay CLI gives them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel

from service.eventtime.process import Emitted, ProcessOperator
from service.eventtime.watermarks import WatermarkStrategy
from service.pipeline.base import InputRecord, Output
from service.pipeline.markers import marker_of
from service.records import DecodeError, decode_model
from tables.codecs import decode_json, decode_utf8, encode_json, encode_utf8
from tables.keyed import StoredStateBackend, state_table
from tables.schema import StateSchema
from tables.store import PartitionStore, PartitionTransaction, TableSpec
from tables.windows import StoredTimers, timer_table

EVENT_TIMERS = timer_table("ptimers")
PROCESSING_TIMERS = timer_table("ptimers.processing")
META: TableSpec[str, Any] = TableSpec("meta", encode_utf8, decode_utf8, encode_json, decode_json)

# In state_schemas: every ``state.*`` table is accepted (the states are not declared).
ANY_STATE = "state.*"

__all__ = ["Input", "KeyedProcess", "state_table"]


@dataclass(frozen=True)
class Input:
    """One input topic: how to decode, key and timestamp its records."""

    topic: str
    value_type: type[BaseModel]
    key: Callable[[Any], str]
    timestamp_ms: Callable[[Any], int] | None = None


@dataclass(frozen=True)
class KeyedProcess:
    """A pipeline running ``function`` over ``inputs`` (one: ``process_element``;
    two: ``process_element1``/``process_element2``). ``outputs`` names topics:
    ``"main"`` for ``ctx.output(value)``, others for side outputs."""

    name: str
    inputs: Sequence[Input]
    function: Any
    outputs: Mapping[str, str]
    watermark: WatermarkStrategy | None = None
    broadcast: Input | None = None
    # The keyed states the function uses (``ctx.state.value(name)``; broadcast
    # state as ``broadcast.<name>``) and their value versions, found by name when
    # resuming from a savepoint. None: any state, at version 1 (no evolution checks).
    states: Mapping[str, StateSchema] | None = None
    _by_topic: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 1 <= len(self.inputs) <= 2:
            raise ValueError("a process pipeline has one or two inputs")
        object.__setattr__(self, "_by_topic", {i.topic: n for n, i in enumerate(self.inputs)})

    @property
    def sources(self) -> Sequence[str]:
        return tuple(i.topic for i in self.inputs)

    @property
    def state_schemas(self) -> Mapping[str, StateSchema]:
        tables = {t.name: StateSchema() for t in (EVENT_TIMERS, PROCESSING_TIMERS, META)}
        if self.states is None:
            return {**tables, ANY_STATE: StateSchema()}
        return {**tables, **{state_table(n).name: s for n, s in self.states.items()}}

    @property
    def output_topics(self) -> Sequence[str]:
        return tuple(dict.fromkeys(self.outputs.values()))

    @property
    def broadcast_topic(self) -> str | None:
        return None if self.broadcast is None else self.broadcast.topic

    def input_index(self, topic: str) -> int:
        return self._by_topic[topic]

    def create_logic(
        self, partition: int, store: PartitionStore, txn: PartitionTransaction
    ) -> ProcessLogic:
        return ProcessLogic(self, store, txn)


class ProcessLogic:
    """:class:`service.pipeline.base.PartitionLogic` of a :class:`KeyedProcess`."""

    def __init__(
        self, definition: KeyedProcess, store: PartitionStore, txn: PartitionTransaction
    ) -> None:
        self._d = definition
        self._store = store
        self._txn = txn
        self._operator = ProcessOperator(
            definition.function,
            backend=StoredStateBackend(txn),
            event_timers=StoredTimers(store, txn, EVENT_TIMERS),
            processing_timers=StoredTimers(store, txn, PROCESSING_TIMERS),
            watermark=definition.watermark,
            inputs=definition.sources,
        )
        self._saved: dict[str, Any] | None = None
        self.broadcast_offsets: dict[int, int] = {}
        self.reload()

    @property
    def watermark_ms(self) -> int:
        return self._operator.watermark_ms

    def reload(self) -> None:
        self._saved = self._store.get(META, "process")
        saved = self._saved or {}
        self._operator.reload(saved.get("watermark"))
        self.broadcast_offsets = {int(p): o for p, o in saved.get("broadcast", {}).items()}

    def process(self, record: InputRecord, out: Output) -> None:
        if marker_of(record) is not None:
            # A repartitioned input (see repartition.py): its records carry their own
            # event time, which is what this logic's watermark follows.
            return
        index = self._d.input_index(record.topic)
        source = self._d.inputs[index]
        decoded = decode_input(source, record, out)
        if decoded is None:
            return
        key, timestamp_ms, value = decoded
        self._operator.source = (record.topic, record.partition, record.offset)
        self._emit(self._operator.process(key, timestamp_ms, value, index), out)

    def process_broadcast(self, record: InputRecord, out: Output) -> None:
        """A control record; skipped if this task's state already reflects it."""
        if record.offset < self.broadcast_offsets.get(record.partition, 0):
            return
        self.broadcast_offsets[record.partition] = record.offset + 1
        assert self._d.broadcast is not None
        try:
            value = decode_model(self._d.broadcast.value_type, record.value)
        except DecodeError as exc:
            out.dead_letter(record, exc.reason)
            return
        self._emit(self._operator.process_broadcast(value.model_dump(mode="json")), out)

    def on_tick(self, now_ms: int, out: Output) -> None:
        self._emit(self._operator.on_tick(now_ms), out)

    def prepare_commit(self) -> None:
        snapshot = {
            "watermark": self._operator.snapshot(),
            "broadcast": {str(p): o for p, o in self.broadcast_offsets.items()},
        }
        if snapshot != self._saved:
            self._txn.put(META, "process", snapshot)
            self._saved = snapshot

    def _emit(self, emitted: list[Emitted], out: Output) -> None:
        for item in emitted:
            topic = self._d.outputs.get(item.output)
            if topic is None:
                known = ", ".join(sorted(self._d.outputs)) or "none"
                raise KeyError(f"output {item.output!r} is not declared (declared: {known})")
            out.send(topic, item.key.encode(), orjson.dumps(item.value), (), item.timestamp_ms)


def decode_input(
    source: Input, record: InputRecord, out: Output
) -> tuple[str, int | None, dict[str, Any]] | None:
    """``(key, event time, value as JSON types)``, or None after dead-lettering it."""
    try:
        model = decode_model(source.value_type, record.value)
    except DecodeError as exc:
        out.dead_letter(record, exc.reason)
        return None
    try:
        key = source.key(model)
        timestamp_ms = None if source.timestamp_ms is None else source.timestamp_ms(model)
    except Exception as exc:  # a user function failed on this record: keep the record
        out.dead_letter(record, f"key/timestamp extraction failed: {exc!r}")
        return None
    if type(key) is not str or (timestamp_ms is not None and type(timestamp_ms) is not int):
        out.dead_letter(record, "key must be a str and timestamp_ms an int")
        return None
    return key, timestamp_ms, model.model_dump(mode="json")
