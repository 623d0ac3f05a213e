"""An idempotent upsert sink: each input record becomes one row in each of a few
PostgreSQL tables, written with ``INSERT ... ON CONFLICT DO UPDATE``.

Exactly-once without two-phase commit: the runtime awaits :meth:`SinkLogic.flush`
before every checkpoint, so the rows of a batch are in PostgreSQL before the
input offsets commit. A failure after the write replays those records, and the
upserts write the same rows again. A row replaces the stored one with the same
key only if its ``version`` columns are at least as large, so rows written out of
order (by a replay, or by a fenced zombie still flushing) never move a row back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pydantic import BaseModel
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from eddy.eventtime.watermarks import MIN_WATERMARK
from eddy.pipeline.base import InputRecord, Output
from eddy.pipeline.markers import marker_of
from eddy.pipeline.pgmigrate import Migration, migrate, quote
from eddy.pipeline.source import Source
from eddy.tables.schema import StateSchema
from eddy.tables.store import PartitionStore, PartitionTransaction

log = logging.getLogger(__name__)

Row = tuple[Any, ...]

ATTEMPTS = 4
# A server that stops answering must not hold the commit past Kafka's transaction
# timeout: give up on a statement (and retry) well before.
CONNECT_TIMEOUT_S = 10.0
STATEMENT_TIMEOUT_S = 20.0


@cache
def transient() -> tuple[type[BaseException], ...]:
    """Worth another attempt: the connection broke, the server is restarting or out
    of connections, or the transaction lost a serialization or deadlock conflict."""
    import asyncpg  # with the first write (pool()), not in apps without a sink

    return (
        asyncpg.PostgresConnectionError,
        asyncpg.exceptions.OperatorInterventionError,
        asyncpg.exceptions.TransactionRollbackError,
        asyncpg.exceptions.InsufficientResourcesError,
        OSError,
        TimeoutError,
    )


@dataclass(frozen=True)
class Upsert:
    """One table: a row per record (the record's fields named by ``columns``),
    unique by ``key``; a row replaces the stored one if its ``version`` columns
    compare greater or equal, in order (no version: always)."""

    table: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    version: tuple[str, ...] = ()

    def row(self, value: BaseModel) -> Row:
        return tuple(getattr(value, column) for column in self.columns)

    def statement(self, schema: str) -> str:
        names = ", ".join(quote(c) for c in self.columns)
        params = ", ".join(f"${n}" for n in range(1, len(self.columns) + 1))
        updates = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in self.columns)
        sql = (
            f"INSERT INTO {quote(schema)}.{quote(self.table)} AS t ({names}) VALUES ({params}) "
            f"ON CONFLICT ({', '.join(quote(k) for k in self.key)}) DO UPDATE SET {updates}"
        )
        if self.version:
            new = ", ".join(f"excluded.{quote(v)}" for v in self.version)
            old = ", ".join(f"t.{quote(v)}" for v in self.version)
            sql += f" WHERE ({new}) >= ({old})"
        return sql

    def dedupe(self, values: Iterable[BaseModel]) -> list[Row]:
        """One row per key, the one the statement would leave (ON CONFLICT cannot
        touch a row twice in one statement), sorted by key so concurrent batches
        lock rows in the same order."""
        key_at = [self.columns.index(k) for k in self.key]
        version_at = [self.columns.index(v) for v in self.version]
        kept: dict[Row, Row] = {}
        for value in values:
            row = self.row(value)
            key = tuple(row[i] for i in key_at)
            old = kept.get(key)
            if old is None or [row[i] for i in version_at] >= [old[i] for i in version_at]:
                kept[key] = row
        return [kept[key] for key in sorted(kept)]


@dataclass
class _Shared:
    """The pipeline's connection pool, made on first use and shared by its partitions."""

    pool: Any = None
    migrated: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(frozen=True)
class PostgresUpsert:
    """Where a stream's records go in PostgreSQL: one row per record in each of
    ``tables`` of ``schema``, which ``migrations`` create (``.sink(...)``)."""

    dsn: str = field(repr=False)  # may hold a password
    schema: str
    tables: Sequence[Upsert]
    migrations: Sequence[Migration] = ()
    max_batch_rows: int = 5_000


@dataclass(frozen=True)
class PostgresSink:
    """A stage upserting each element of ``source`` as ``upsert`` says."""

    name: str
    source: Source
    upsert_to: PostgresUpsert
    _shared: _Shared = field(default_factory=_Shared, init=False, repr=False, compare=False)

    @property
    def dsn(self) -> str:
        return self.upsert_to.dsn

    @property
    def schema(self) -> str:
        return self.upsert_to.schema

    @property
    def tables(self) -> Sequence[Upsert]:
        return self.upsert_to.tables

    @property
    def migrations(self) -> Sequence[Migration]:
        return self.upsert_to.migrations

    @property
    def max_batch_rows(self) -> int:
        return self.upsert_to.max_batch_rows

    @property
    def state_schemas(self) -> Mapping[str, StateSchema]:
        return {}  # no state: the database is the state

    @property
    def sources(self) -> Sequence[str]:
        return (self.source.topic,)

    @property
    def output_topics(self) -> Sequence[str]:
        return ()

    def create_logic(
        self, partition: int, store: PartitionStore, txn: PartitionTransaction
    ) -> SinkLogic:
        return SinkLogic(self)

    async def upsert(self, values: Sequence[BaseModel]) -> int:
        """Write ``values`` in one transaction (retried if transient); rows written."""
        batches = [(table.statement(self.schema), table.dedupe(values)) for table in self.tables]
        retrying = AsyncRetrying(
            stop=stop_after_attempt(ATTEMPTS),
            wait=wait_exponential(multiplier=0.1, max=2.0),
            retry=retry_if_exception_type(transient()),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                pool = await self._pool()
                async with pool.acquire() as connection, connection.transaction():
                    for sql, rows in batches:
                        if rows:
                            await connection.executemany(sql, rows)
        return sum(len(rows) for _, rows in batches)

    async def close(self) -> None:
        shared = self._shared
        if shared.pool is not None:
            pool, shared.pool = shared.pool, None
            await pool.close()

    async def _pool(self) -> Any:
        shared = self._shared
        if shared.pool is not None and shared.migrated:
            return shared.pool
        async with shared.lock:
            if shared.pool is None:
                # asyncpg (about 14 MB) is loaded by apps that write to PostgreSQL only.
                import asyncpg

                shared.pool = await asyncpg.create_pool(
                    self.dsn,
                    min_size=1,
                    max_size=4,
                    timeout=CONNECT_TIMEOUT_S,
                    command_timeout=STATEMENT_TIMEOUT_S,
                )
            if not shared.migrated:
                async with shared.pool.acquire() as connection:
                    applied = await migrate(connection, self.schema, self.migrations)
                for migration in applied:
                    log.info(
                        "%s: applied migration %d (%s)",
                        self.schema,
                        migration.version,
                        migration.name,
                    )
                shared.migrated = True
        return shared.pool


class SinkLogic:
    """:class:`eddy.pipeline.base.AsyncLogic` of a :class:`PostgresSink`: buffers
    decoded records and upserts them at each checkpoint, or sooner when
    ``max_batch_rows`` are waiting. It keeps no state of its own."""

    def __init__(self, definition: PostgresSink) -> None:
        self._d = definition
        self._buffer: list[BaseModel] = []
        self._deferred = False  # an early write failed: leave it to the checkpoint

    @property
    def watermark_ms(self) -> int:
        return MIN_WATERMARK

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def process(self, record: InputRecord, out: Output) -> None:
        raise TypeError(f"{self._d.name} writes to PostgreSQL asynchronously: use process_async")

    async def process_async(self, record: InputRecord, out: Output) -> None:
        if marker_of(record) is not None:
            return
        read = self._d.source.read(record, out)
        if read is None:
            return
        self._buffer.extend(value for _, value in read.elements)
        if len(self._buffer) >= self._d.max_batch_rows and not self._deferred:
            try:
                await self._write(out)
            except Exception as exc:
                # Not this record's fault: raising here would count against it and
                # end with it dead-lettered. The checkpoint's flush tries again, and
                # if it fails the task reopens from its last commit.
                log.warning(
                    "%s: early write failed, retrying at the checkpoint: %r", self._d.name, exc
                )
                self._deferred = True

    async def flush(self, out: Output) -> None:
        await self._write(out)
        self._deferred = False

    def cancel(self) -> None:
        self._buffer = []
        self._deferred = False

    def on_tick(self, now_ms: int, out: Output) -> None:
        pass

    async def tick_async(self, now_ms: int, out: Output) -> None:
        pass

    def advance_watermark(self, watermark_ms: int, out: Output) -> None:
        pass

    async def advance_watermark_async(self, watermark_ms: int, out: Output) -> None:
        pass

    def prepare_commit(self) -> None:
        pass  # nothing to keep: PostgreSQL has the rows, Kafka the offsets

    def reload(self) -> None:
        self.cancel()

    async def _write(self, out: Output) -> None:
        if not self._buffer:
            return
        started = time.perf_counter()
        rows = await self._d.upsert(self._buffer)
        out.observe("sink.batch", time.perf_counter() - started)
        out.count("sink.rows", rows)
        self._buffer = []
