"""Async enrichment: one external lookup per record (docs/semantics.md, "Async enrichment").

Each record of ``source`` is looked up with ``lookup`` (an async function: an HTTP
call, a database query) and written to ``sink`` as ``enrich(value, answer)``.
Up to ``capacity`` lookups per partition are in flight at once; a lookup that
fails is retried with exponential backoff, and one that has no answer (``lookup``
returned None), keeps failing, or is not answered within ``timeout_ms`` in all
gives ``fallback`` instead. Results leave in input order (``ordered``) or as they
finish, never across a watermark (:mod:`eddy.eventtime.async_wait`); the
watermark enters the queue every ``watermark_interval_ms`` of processing time
and before each checkpoint, as Flink's periodic watermarks do.

Exactly-once: the runtime awaits :meth:`EnrichmentLogic.flush` before every
checkpoint, so no lookup is in flight across a commit. A failure discards the
uncommitted lookups with the transaction, and their records, whose offsets were
not committed, are looked up again after recovery.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, stop_after_attempt, wait_exponential

from eddy.eventtime.async_wait import AsyncWaitQueue, Result, Watermark
from eddy.eventtime.watermarks import MIN_WATERMARK, WatermarkStrategy, WatermarkTracker
from eddy.pipeline.base import InputRecord, Output, Target
from eddy.pipeline.keyed import META
from eddy.pipeline.source import Source
from eddy.tables.schema import StateSchema
from eddy.tables.store import PartitionStore, PartitionTransaction

Lookup = Callable[[Any], Awaitable[Any | None]]


@dataclass(frozen=True)
class AsyncEnrichment:
    name: str
    source: Source
    lookup: Lookup
    enrich: Callable[[Any, Any], Any]
    fallback: Any
    outputs: tuple[Target, ...]
    watermark: WatermarkStrategy
    capacity: int = 100
    timeout_ms: int = 5_000
    retries: int = 2
    ordered: bool = True
    # How often (processing time) the watermark enters the result queue as a barrier.
    watermark_interval_ms: int = 200
    # Releases what ``lookup`` holds (an HTTP session, a pool) when the worker stops.
    on_close: Callable[[], Awaitable[None]] | None = None

    async def close(self) -> None:
        if self.on_close is not None:
            await self.on_close()

    @property
    def state_schemas(self) -> Mapping[str, StateSchema]:
        return {META.name: StateSchema()}  # the watermark

    @property
    def sources(self) -> Sequence[str]:
        return (self.source.topic,)

    @property
    def output_topics(self) -> Sequence[str]:
        return tuple(dict.fromkeys(t.topic for t in self.outputs))

    def create_logic(
        self, partition: int, store: PartitionStore, txn: PartitionTransaction
    ) -> EnrichmentLogic:
        return EnrichmentLogic(self, store, txn)


@dataclass(frozen=True, slots=True)
class Enriched:
    key: str | None
    timestamp_ms: int
    value: Any


async def look_up(
    lookup: Lookup, value: Any, *, timeout_s: float, retries: int, out: Output
) -> tuple[Any | None, str]:
    """``(answer, outcome)``; outcome is ``ok``, ``miss``, ``error`` or ``timeout``."""

    def retrying(state: RetryCallState) -> None:
        out.count("lookup.retry")

    retry = AsyncRetrying(
        stop=stop_after_attempt(retries + 1),
        wait=wait_exponential(multiplier=0.02, max=1.0),
        before_sleep=retrying,
        reraise=True,
    )
    try:
        async with asyncio.timeout(timeout_s):
            async for attempt in retry:
                with attempt:
                    answer = await lookup(value)
    except TimeoutError:
        return None, "timeout"
    except Exception:  # the service kept failing: the fallback, as for a miss
        return None, "error"
    return answer, "miss" if answer is None else "ok"


class EnrichmentLogic:
    """:class:`eddy.pipeline.base.AsyncLogic` of an :class:`AsyncEnrichment`."""

    def __init__(
        self, definition: AsyncEnrichment, store: PartitionStore, txn: PartitionTransaction
    ) -> None:
        self._d = definition
        self._store = store
        self._txn = txn
        self._queue: AsyncWaitQueue[Enriched] = AsyncWaitQueue(
            definition.capacity, ordered=definition.ordered
        )
        self._tracker = WatermarkTracker(definition.watermark, definition.sources)
        self._released_ms = MIN_WATERMARK
        self._inserted_ms = MIN_WATERMARK
        self._barrier_at_ms = MIN_WATERMARK
        self._now_ms = 0
        self._saved: dict[str, Any] | None = None
        self.reload()

    @property
    def watermark_ms(self) -> int:
        """The last watermark released: never ahead of a pending result."""
        return self._released_ms

    def reload(self) -> None:
        self._queue.cancel()
        self._tracker = WatermarkTracker(self._d.watermark, self._d.sources)
        self._saved = self._store.get(META, "enrich")
        if self._saved is not None:
            self._tracker.restore(self._saved)
        self._released_ms = self._inserted_ms = self._tracker.watermark_ms

    def process(self, record: InputRecord, out: Output) -> None:
        raise TypeError(f"{self._d.name} looks records up asynchronously: use process_async")

    async def process_async(self, record: InputRecord, out: Output) -> None:
        read = self._d.source.read(record, out)
        if read is not None:
            event_ms = read.timestamp_ms
            for key, value in read.elements:
                await self._queue.put(partial(self._call, key, event_ms, value, out))
            self._tracker.on_event(record.topic, event_ms, read.value, self._now_ms)
        self._emit(self._queue.take(), out)

    async def tick_async(self, now_ms: int, out: Output) -> None:
        self.on_tick(now_ms, out)

    def advance_watermark(self, watermark_ms: int, out: Output) -> None:
        """An explicit watermark enters the queue as a barrier, like any other."""
        if watermark_ms > self._inserted_ms:
            self._inserted_ms = watermark_ms
            self._queue.put_watermark(watermark_ms)
        self._emit(self._queue.take(), out)

    async def advance_watermark_async(self, watermark_ms: int, out: Output) -> None:
        self.advance_watermark(watermark_ms, out)

    def on_tick(self, now_ms: int, out: Output) -> None:
        self._now_ms = now_ms
        # Flink's periodic watermark: a barrier per record would make unordered
        # output ordered whenever timestamps increase, so insert one per interval.
        if now_ms - self._barrier_at_ms >= self._d.watermark_interval_ms:
            self._barrier()
            self._barrier_at_ms = now_ms
        self._emit(self._queue.take(), out)

    async def flush(self, out: Output) -> None:
        self._barrier()
        self._emit(await self._queue.drain(), out)

    def _barrier(self) -> None:
        if self._tracker.watermark_ms > self._inserted_ms:
            self._inserted_ms = self._tracker.watermark_ms
            self._queue.put_watermark(self._inserted_ms)

    def cancel(self) -> None:
        self._queue.cancel()

    def prepare_commit(self) -> None:
        snapshot = self._tracker.snapshot()
        if snapshot != self._saved:
            self._txn.put(META, "enrich", snapshot)
            self._saved = snapshot

    async def _call(self, key: str | None, timestamp_ms: int, value: Any, out: Output) -> Enriched:
        started = time.perf_counter()
        answer, outcome = await look_up(
            self._d.lookup,
            value,
            timeout_s=self._d.timeout_ms / 1000,
            retries=self._d.retries,
            out=out,
        )
        out.observe("lookup", time.perf_counter() - started)
        if outcome != "ok":
            out.count(f"lookup.{outcome}")
            answer = self._d.fallback
        return Enriched(key, timestamp_ms, self._d.enrich(value, answer))

    def _emit(self, released: list[Result[Enriched] | Watermark], out: Output) -> None:
        for item in released:
            if isinstance(item, Watermark):
                self._released_ms = item.watermark_ms
                continue
            enriched = item.value
            for target in self._d.outputs:
                target.send(enriched.key, enriched.value, enriched.timestamp_ms, out)
