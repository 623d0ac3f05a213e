"""Keyed process functions: per-record logic with named state scoped to the key.

The shape of Flink's ``KeyedProcessFunction``: the runtime decodes a record,
extracts its key, and calls ``process(value, ctx)``; ``ctx`` gives the key, the
record's event time and source position, named value state for the current key,
and ``emit`` to named outputs. State and emissions commit together with the
input offset, so a function sees each record's effects exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import orjson
from pydantic import BaseModel

from service.eventtime import MIN_WATERMARK
from service.pipeline.base import InputRecord, Output
from service.records import DecodeError, decode_model
from tables.codecs import decode_json, decode_utf8, encode_json, encode_utf8
from tables.store import PartitionStore, PartitionTransaction, TableSpec

V = TypeVar("V", contravariant=True)


def state_table(name: str) -> TableSpec[str, Any]:
    """The table behind value state ``name``: key -> JSON value."""
    return TableSpec(f"state.{name}", encode_utf8, decode_utf8, encode_json, decode_json)


class ValueState:
    """One named value per key; reads see this checkpoint's uncommitted writes."""

    def __init__(self, txn: PartitionTransaction, table: TableSpec[str, Any]) -> None:
        self._txn = txn
        self._table = table
        self.key = ""

    def get(self) -> Any:
        return self._txn.get(self._table, self.key)

    def set(self, value: Any) -> None:
        self._txn.put(self._table, self.key, value)

    def clear(self) -> None:
        self._txn.delete(self._table, self.key)


class KeyedContext:
    """What a function sees while it handles one record."""

    def __init__(self, states: Mapping[str, ValueState], outputs: Mapping[str, str]) -> None:
        self._states = states
        self._topics = outputs
        self._out: Output | None = None
        self.key = ""
        self.record: InputRecord | None = None

    def state(self, name: str) -> ValueState:
        try:
            return self._states[name]
        except KeyError:
            raise KeyError(f"state {name!r} is not declared by the pipeline") from None

    def emit(self, output: str, value: Mapping[str, Any], key: str | None = None) -> None:
        """Send ``value`` (as JSON) to the named output, keyed by ``key`` or the current key."""
        assert self._out is not None
        topic = self._topics[output]
        self._out.send(topic, (self.key if key is None else key).encode(), orjson.dumps(value))

    def bind(self, key: str, record: InputRecord, out: Output) -> None:
        self.key = key
        self.record = record
        self._out = out
        for state in self._states.values():
            state.key = key


class KeyedProcessFunction(Protocol, Generic[V]):
    def process(self, value: V, ctx: KeyedContext) -> None: ...


@dataclass(frozen=True)
class KeyedProcess:
    """A pipeline that runs a keyed process function over one input topic."""

    name: str
    source: str
    value_type: type[BaseModel]
    key: Callable[[Any], str]
    function: KeyedProcessFunction[Any]
    outputs: Mapping[str, str]
    states: Sequence[str] = ()

    @property
    def sources(self) -> Sequence[str]:
        return (self.source,)

    @property
    def output_topics(self) -> Sequence[str]:
        return tuple(self.outputs.values())

    def create_logic(
        self, partition: int, store: PartitionStore, txn: PartitionTransaction
    ) -> KeyedLogic:
        return KeyedLogic(self, txn)


class KeyedLogic:
    """:class:`service.pipeline.base.PartitionLogic` of a :class:`KeyedProcess`."""

    def __init__(self, definition: KeyedProcess, txn: PartitionTransaction) -> None:
        self._d = definition
        states = {name: ValueState(txn, state_table(name)) for name in definition.states}
        self._ctx = KeyedContext(states, definition.outputs)

    @property
    def watermark_ms(self) -> int:
        return MIN_WATERMARK  # processing is by arrival; no event-time clock

    def process(self, record: InputRecord, out: Output) -> None:
        try:
            value = decode_model(self._d.value_type, record.value)
        except DecodeError as exc:
            out.dead_letter(record, exc.reason)
            return
        try:
            key = self._d.key(value)
        except Exception as exc:  # a user function failed on this record: keep the record
            out.dead_letter(record, f"key extraction failed: {exc!r}")
            return
        self._ctx.bind(key, record, out)
        self._d.function.process(value, self._ctx)

    def on_tick(self, now_ms: int, out: Output) -> None:
        """No processing-time behaviour yet."""

    def prepare_commit(self) -> None:
        """Value state lives in the transaction already; nothing is held in memory."""

    def reload(self) -> None:
        """Nothing in memory to rebuild."""
