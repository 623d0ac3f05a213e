"""What the runtime needs from a pipeline, and what a pipeline gets from it.

A pipeline is a frozen definition. For each input partition a worker owns, the
runtime asks it for a :class:`PartitionLogic` bound to that partition's state,
feeds it records in offset order, and commits what it emitted together with the
input offsets and its state changes in one Kafka transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from eddy.tables.schema import StateSchema
from eddy.tables.store import ENCODE_ERRORS, PartitionStore, PartitionTransaction, shortened

Headers = Sequence[tuple[str, bytes]]
# What encoding an output raises for a value its topic cannot carry (a serde's
# EncodeError, orjson's TypeError, struct's OverflowError); a step's error is a
# StepError, never one of these.
UNWRITABLE = ENCODE_ERRORS


def unwritable_reason(exc: BaseException) -> str:
    """The one-line dead-letter reason of an output that could not be encoded."""
    return f"the result cannot be written: {shortened(str(exc))}"


@dataclass(frozen=True)
class Target:
    """An output topic (its name on the broker) and how values are written to it.

    ``steps`` are the agent's stateless steps after its keyed step (map, filter,
    flat_map), run on each value before it is encoded.
    """

    topic: str
    encode: Callable[[Any], bytes]
    steps: Callable[[Any], Iterable[Any]] | None = None
    encode_key: Callable[[str], bytes] | None = None  # None: UTF-8

    def key(self, key: str | None) -> bytes | None:
        """``key`` as this topic's Kafka key."""
        if key is None:
            return None
        return key.encode() if self.encode_key is None else self.encode_key(key)

    def write(self, value: Any) -> list[bytes]:
        """The encoded records ``value`` becomes on this topic.

        Raises:
            StepError: a step raised; the message points at the user's line.
        """
        if self.steps is None:
            return [self.encode(value)]
        try:
            values = list(self.steps(value))
        except Exception as exc:
            from eddy.pipeline.source import failure

            raise StepError(f"writing to {self.topic}: {failure('a step', exc)}") from exc
        return [self.encode(v) for v in values]

    def send(self, key: str | None, value: Any, timestamp_ms: int | None, out: Output) -> None:
        """Write ``value`` to this topic; one that cannot be encoded (an int past 64
        bits, an infinity) is dead-lettered with its key instead."""
        try:
            encoded_key = self.key(key)
            encoded = self.write(value)
        except UNWRITABLE as exc:
            out.dead_letter_output(self.topic, key, value, unwritable_reason(exc))
            return
        for data in encoded:
            out.send(self.topic, encoded_key, data, (), timestamp_ms)


class StepError(RuntimeError):
    """A user step after an agent's keyed step raised. The record that caused the
    output is retried, then dead-lettered with this message (restart settings)."""


class InputRecord(Protocol):
    """The parts of a consumed Kafka record a pipeline may read."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes]]: ...


class Output(Protocol):
    """Where a pipeline's records go; they commit with the input that caused them."""

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Headers = (),
        timestamp_ms: int | None = None,
        partition: int | None = None,
    ) -> None: ...

    def partitions_of(self, topic: str) -> int:
        """How many partitions ``topic`` has (to address each one, e.g. watermarks)."""
        ...

    def dead_letter(self, record: InputRecord, reason: str) -> None:
        """Send ``record``'s original bytes to the dead-letter topic with ``reason``."""
        ...

    def dead_letter_output(
        self,
        topic: str | None,
        key: str | None,
        value: Any,
        reason: str,
        window: tuple[int, int] | None = None,
    ) -> None:
        """``value`` cannot be encoded for ``topic`` (None: the stage's queryable
        results): a sum that overflowed to infinity, an integer past 64 bits. Send
        its key, its window ``(start_ms, end_ms)``, ``reason`` and its repr to the
        dead-letter topic; the logic goes on with its other outputs."""
        ...

    def count(self, event: str, n: int = 1) -> None:
        """Count a pipeline event (``late``, ``window.first``...) for metrics."""
        ...

    def observe(self, event: str, seconds: float) -> None:
        """Time a pipeline event (``lookup``, ``sink.batch``) for metrics."""
        ...


class PartitionLogic(Protocol):
    """One pipeline's processing for one input partition."""

    def process(self, record: InputRecord, out: Output) -> None: ...

    def on_tick(self, now_ms: int, out: Output) -> None:
        """Processing time reached ``now_ms`` (called between batches, records or not)."""
        ...

    def prepare_commit(self) -> None:
        """Write in-memory progress (watermarks) into the transaction before it commits."""
        ...

    def reload(self) -> None:
        """Rebuild in-memory state from the committed store (after restore or abort)."""
        ...

    def advance_watermark(self, watermark_ms: int, out: Output) -> None:
        """An explicit watermark: the test driver's, or the end of a bounded input."""
        ...

    @property
    def watermark_ms(self) -> int: ...


@runtime_checkable
class BoundedFiring(Protocol):
    """A logic whose watermark fires a bounded number of timers at a time: after a
    record or tick leaves :attr:`firing_due` set, the runtime checkpoints and calls
    :meth:`fire_due` until it is clear, before the next record."""

    @property
    def firing_due(self) -> bool: ...

    def fire_due(self, out: Output) -> None: ...


class AsyncLogic(PartitionLogic, Protocol):
    """A logic that waits on I/O (lookups, database writes) while processing.

    The runtime awaits :meth:`process_async` instead of calling ``process`` and
    awaits :meth:`flush` before every checkpoint, so no request is in flight
    across a commit: what a failure interrupts was never committed, and its
    records are processed (looked up, written) again after recovery.
    """

    async def process_async(self, record: InputRecord, out: Output) -> None: ...

    async def tick_async(self, now_ms: int, out: Output) -> None:
        """:meth:`on_tick`, awaiting what the logic's functions await (timers)."""
        ...

    async def advance_watermark_async(self, watermark_ms: int, out: Output) -> None: ...

    async def flush(self, out: Output) -> None:
        """Finish everything in flight and emit its results."""
        ...

    def cancel(self) -> None:
        """Drop in-flight work: the task is being discarded."""
        ...


class BroadcastLogic(PartitionLogic, Protocol):
    """A logic that also reads a broadcast input, keeping its own position in it."""

    broadcast_offsets: dict[int, int]

    def process_broadcast(self, record: InputRecord, out: Output) -> None: ...


class Pipeline(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def sources(self) -> Sequence[str]:
        """Co-partitioned input topics: partition p of each feeds the same task."""
        ...

    @property
    def output_topics(self) -> Sequence[str]:
        """Topics the pipeline writes to (created at start if missing)."""
        ...

    @property
    def state_schemas(self) -> Mapping[str, StateSchema]:
        """The tables the pipeline keeps, by stable name, with their value versions
        (a savepoint's state is found by these names; docs/savepoints.md)."""
        ...

    def create_logic(
        self, partition: int, store: PartitionStore, txn: PartitionTransaction
    ) -> PartitionLogic: ...


@runtime_checkable
class ClosingPipeline(Pipeline, Protocol):
    """A pipeline holding resources beyond its tasks (a connection pool, an HTTP
    session). The runtime calls :meth:`close` once, when it stops, in the event
    loop that used them."""

    async def close(self) -> None: ...
