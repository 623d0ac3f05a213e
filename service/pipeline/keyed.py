"""Process-function stages: a (co-)process function over one or two keyed,
co-partitioned inputs, optionally with a broadcast (control) input.

Each input's records become keyed elements (:mod:`eddy.pipeline.source`) and
reach the function through :class:`eddy.eventtime.process.ProcessOperator`
as their typed values. Keyed state, timers and the watermark live in the
partition's RocksDB store, and everything the function emits commits with the
input offsets. A function whose handlers are ``async def`` (an async agent) is
awaited record by record, and the runtime waits for it before each checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eddy.eventtime.process import Emitted, ProcessOperator
from eddy.eventtime.watermarks import WatermarkStrategy
from eddy.pipeline.base import InputRecord, Output, Target
from eddy.pipeline.markers import marker_of
from eddy.pipeline.source import Read, Source
from eddy.serde import DecodeError
from eddy.tables.codecs import decode_json, decode_utf8, encode_json, encode_utf8
from eddy.tables.keyed import StoredStateBackend, state_table
from eddy.tables.schema import StateSchema
from eddy.tables.store import PartitionStore, PartitionTransaction, TableSpec
from eddy.tables.windows import StoredTimers, timer_table

EVENT_TIMERS = timer_table("ptimers")
PROCESSING_TIMERS = timer_table("ptimers.processing")
META: TableSpec[str, Any] = TableSpec("meta", encode_utf8, decode_utf8, encode_json, decode_json)
MAIN = "main"

# In state_schemas: every ``state.*`` table is accepted (the states are not declared).
ANY_STATE = "state.*"

__all__ = ["KeyedProcess", "state_table"]


@dataclass(frozen=True)
class KeyedProcess:
    """A stage running ``function`` over ``inputs`` (one: ``process_element``;
    two: ``process_element1``/``process_element2``). ``outputs`` maps an output
    name (``"main"`` for ``ctx.output(value)``) to the topics it writes to."""

    name: str
    inputs: tuple[Source, ...]
    function: Any
    outputs: Mapping[str, tuple[Target, ...]]
    watermark: WatermarkStrategy | None = None
    broadcast: Source | None = None
    # The keyed states the function uses, by state name (broadcast state as
    # ``broadcast.<name>``), with their value versions, found by name when resuming
    # from a savepoint. None: any state, at version 1 (no evolution checks).
    states: Mapping[str, StateSchema] | None = None

    def __post_init__(self) -> None:
        if not 1 <= len(self.inputs) <= 2:
            raise ValueError("a process stage has one or two inputs")

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
        return tuple(dict.fromkeys(t.topic for ts in self.outputs.values() for t in ts))

    @property
    def broadcast_topic(self) -> str | None:
        return None if self.broadcast is None else self.broadcast.topic

    def create_logic(
        self, partition: int, store: PartitionStore, txn: PartitionTransaction
    ) -> ProcessLogic:
        logic = ProcessLogic(self, store, txn)
        return AsyncProcessLogic(self, store, txn) if logic.is_async else logic


class ProcessLogic:
    """:class:`eddy.pipeline.base.PartitionLogic` of a :class:`KeyedProcess`."""

    def __init__(
        self, definition: KeyedProcess, store: PartitionStore, txn: PartitionTransaction
    ) -> None:
        self._d = definition
        self._store = store
        self._txn = txn
        self._index = {source.topic: n for n, source in enumerate(definition.inputs)}
        self._operator = ProcessOperator(
            definition.function,
            backend=StoredStateBackend(txn),
            event_timers=StoredTimers(txn, EVENT_TIMERS),
            processing_timers=StoredTimers(txn, PROCESSING_TIMERS),
            watermark=definition.watermark,
            inputs=definition.sources,
        )
        self._saved: dict[str, Any] | None = None
        self.broadcast_offsets: dict[int, int] = {}
        self.reload()

    @property
    def is_async(self) -> bool:
        return self._operator.is_async

    @property
    def watermark_ms(self) -> int:
        return self._operator.watermark_ms

    def reload(self) -> None:
        self._saved = self._store.get(META, "process")
        saved = self._saved or {}
        self._operator.reload(saved.get("watermark"))
        self.broadcast_offsets = {int(p): o for p, o in saved.get("broadcast", {}).items()}

    def _read(self, record: InputRecord, out: Output) -> tuple[int, Read] | None:
        if marker_of(record) is not None:
            # A repartitioned input (see repartition.py): its records carry their own
            # event time, which is what this logic's watermark follows.
            return None
        index = self._index[record.topic]
        read = self._d.inputs[index].read(record, out)
        if read is None:
            return None
        self._operator.source = (record.topic, record.partition, record.offset)
        return index, read

    def process(self, record: InputRecord, out: Output) -> None:
        found = self._read(record, out)
        if found is None:
            return
        index, read = found
        op = self._operator
        emitted: list[Emitted] = []
        for key, value in read.elements:
            emitted += op.process_element(key, read.timestamp_ms, value, index)
        emitted += op.observe(index, read.timestamp_ms, read.value)
        self._emit(emitted, out)

    def process_broadcast(self, record: InputRecord, out: Output) -> None:
        """A control record; skipped if this task's state already reflects it."""
        value = self._broadcast_value(record, out)
        if value is not None:
            self._emit(self._operator.process_broadcast(value), out)

    def _broadcast_value(self, record: InputRecord, out: Output) -> Any | None:
        if record.offset < self.broadcast_offsets.get(record.partition, 0):
            return None
        self.broadcast_offsets[record.partition] = record.offset + 1
        assert self._d.broadcast is not None
        try:
            return self._d.broadcast.serde.decode(record.value)
        except DecodeError as exc:
            out.dead_letter(record, exc.reason)
            return None

    def on_tick(self, now_ms: int, out: Output) -> None:
        self._emit(self._operator.on_tick(now_ms), out)

    def advance_watermark(self, watermark_ms: int, out: Output) -> None:
        self._emit(self._operator.advance_watermark(watermark_ms), out)

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
            targets = self._d.outputs.get(item.output)
            if targets is None:
                known = ", ".join(sorted(self._d.outputs)) or "none"
                raise KeyError(f"output {item.output!r} is not declared (declared: {known})")
            for target in targets:
                target.send(item.key, item.value, item.timestamp_ms, out)


class AsyncProcessLogic(ProcessLogic):
    """An async agent's logic: handlers are awaited, one record at a time, so
    keyed state and timers see records in offset order as with a synchronous
    function. Nothing is in flight between records, so a checkpoint has nothing
    to wait for."""

    def process(self, record: InputRecord, out: Output) -> None:
        raise TypeError(f"{self._d.name} awaits its function: use process_async")

    async def process_async(self, record: InputRecord, out: Output) -> None:
        found = self._read(record, out)
        if found is None:
            return
        index, read = found
        op = self._operator
        emitted: list[Emitted] = []
        for key, value in read.elements:
            op.emitted = []
            await op.element_async(key, read.timestamp_ms, value, index)
            emitted += op.emitted
        emitted += await op.observe_async(index, read.timestamp_ms, read.value)
        self._emit(emitted, out)

    async def tick_async(self, now_ms: int, out: Output) -> None:
        self._emit(await self._operator.on_tick_async(now_ms), out)

    def on_tick(self, now_ms: int, out: Output) -> None:
        raise TypeError(f"{self._d.name} awaits its function: use tick_async")

    async def advance_watermark_async(self, watermark_ms: int, out: Output) -> None:
        self._emit(await self._operator.advance_watermark_async(watermark_ms), out)

    async def flush(self, out: Output) -> None:
        """Nothing is in flight between records."""

    def cancel(self) -> None:
        """Nothing is in flight between records."""
