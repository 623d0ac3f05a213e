"""Changelog-backed RocksDB state, one database per (pipeline, partition).

Layering, after Quix Streams: a :class:`PartitionStore` is the committed state of
one partition on local disk; a :class:`PartitionTransaction` holds the changes of
the checkpoint in progress as Python objects. At a checkpoint the runtime sends
:meth:`PartitionTransaction.changelog_records` in the Kafka transaction, commits
it, and only then calls :meth:`PartitionTransaction.commit`, which writes one
RocksDB ``WriteBatch`` holding the data and the changelog offset. Local state is
therefore never ahead of the changelog, and a restart restores only the tail.

Every table of a partition shares one changelog topic partition; a changelog key
is the table's name prefix plus the table key, so compaction keeps the latest
value of each (table, key).
"""

from __future__ import annotations

import heapq
import itertools
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from rocksdict import Checkpoint, Options, Rdict, ReadOptions, WriteBatch, WriteOptions

from eddy.tables.budget import within_budget
from eddy.tables.cache import DELETED as _DELETED
from eddy.tables.cache import MISSING as _MISSING
from eddy.tables.cache import CachedTable, WatchedCachedTable

K = TypeVar("K")
V = TypeVar("V")

# Keys under an empty table name are local bookkeeping, never sent to a changelog.
_LOCAL = b"\x00"
_CHANGELOG_OFFSET = _LOCAL + b"changelog_offset"


@dataclass(frozen=True, eq=False)  # identity hash: specs key hot dicts
class TableSpec(Generic[K, V]):
    """A named table inside a partition store, with its key and value codecs."""

    name: str
    encode_key: Callable[[K], bytes]
    decode_key: Callable[[bytes], K]
    encode_value: Callable[[V], bytes]
    decode_value: Callable[[bytes], V]
    prefix: bytes = field(init=False)

    def __post_init__(self) -> None:
        raw = self.name.encode()
        if not 0 < len(raw) < 256:
            raise ValueError("table names are 1-255 bytes")
        object.__setattr__(self, "prefix", bytes([len(raw)]) + raw)

    def full_key(self, key: K) -> bytes:
        return self.prefix + self.encode_key(key)


def _options() -> Options:
    options = within_budget(Options(raw_mode=True))
    options.create_if_missing(True)
    return options


class StateFormatError(RuntimeError):
    """Stored state this version cannot read: written by an incompatible Eddy."""


class UnwritableStateError(ValueError):
    """A changed state entry cannot be encoded (a float sum overflowed to infinity,
    an integer past 64 bits, a key over 65535 bytes): the checkpoint that holds it
    can never be written. The message names the table and key, in one line."""


# Encoders say a value cannot be written with these (orjson: TypeError; ours:
# EncodeError, a ValueError; a key codec: ValueError; struct: OverflowError).
ENCODE_ERRORS = (ValueError, TypeError, OverflowError)
# Longest value text a reason quotes; the rest is elided in the middle, so the
# encoder's explanation at the end ("NaN or infinity") survives.
REASON_CHARS = 300


def shortened(text: str, limit: int = REASON_CHARS) -> str:
    """``text`` on one line, at most about ``limit`` characters (head ... tail)."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    half = limit // 2
    return f"{line[:half]} ... {line[-half:]}"


class PartitionStore:
    """The committed state of one partition, in one RocksDB directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = Rdict(str(path), _options())
        # Plain counters, read by the runtime's metrics (tables/ knows no Prometheus).
        self.reads = 0
        self.writes = 0
        self.keys_scanned = 0  # entries range reads yielded (what opening a partition costs)

    def get(self, table: TableSpec[K, V], key: K) -> V | None:
        self.reads += 1
        raw = self._db.get(table.full_key(key))
        if raw is None:
            return None
        try:
            return table.decode_value(raw)
        except (ValueError, TypeError, KeyError) as exc:
            # Most likely state (local, or restored from the changelog) from an
            # older Eddy whose format changed; guessing would corrupt results.
            raise StateFormatError(
                f"cannot read table {table.name!r} of {self.path} ({exc!r}): the state was "
                "written by an incompatible Eddy version. Start from empty state: use a new "
                "EDDY_APP_ID, or delete EDDY_STATE_DIR and the application's changelog topics"
            ) from None

    def scan(
        self,
        table: TableSpec[K, V],
        lower: bytes = b"",
        upper: bytes | None = None,
        *,
        reverse: bool = False,
    ) -> Iterator[tuple[K, V]]:
        """Committed entries whose encoded key is in ``[lower, upper)``, in key order
        (newest first with ``reverse``)."""
        start = table.prefix + lower
        bound = table.prefix + upper if upper is not None else _next_prefix(table.prefix)
        read_options = ReadOptions()
        skip = len(table.prefix)
        if reverse:
            # Bounds are checked here: a backward seek lands on the greatest key at or
            # below ``bound``, and iterates down past ``start`` into other tables.
            items = self._db.items(backwards=True, from_key=bound)
        else:
            read_options.set_iterate_upper_bound(bound)
            items = self._db.items(from_key=start, read_opt=read_options)
        for raw_key, raw_value in cast(Iterator[tuple[bytes, bytes]], items):
            if reverse:
                if raw_key >= bound:
                    continue
                if raw_key < start:
                    return
            self.keys_scanned += 1
            yield table.decode_key(raw_key[skip:]), table.decode_value(raw_value)

    def last(
        self, table: TableSpec[K, V], lower: bytes = b"", upper: bytes | None = None
    ) -> tuple[K, V] | None:
        """The committed entry with the greatest key in ``[lower, upper)``, if any."""
        return next(self.scan(table, lower, upper, reverse=True), None)

    def begin(self, *, watched: bool = False) -> PartitionTransaction:
        """The transaction of the checkpoints to come; ``watched``: one that can check
        each record's changes as it goes (:class:`WatchedTransaction`)."""
        return WatchedTransaction(self) if watched else PartitionTransaction(self)

    def size(self) -> tuple[int, int]:
        """RocksDB's estimates of (keys, live data bytes): cheap, for metrics."""
        keys = self._db.property_int_value("rocksdb.estimate-num-keys") or 0
        live = self._db.property_int_value("rocksdb.estimate-live-data-size") or 0
        return int(keys), int(live)

    def table_names(self) -> list[str]:
        """Names of the tables with at least one entry, in order.

        One seek per table: a key starts with its table's length-prefixed name, so
        after reading one key the next table starts at the name's next prefix.
        """
        names: list[str] = []
        start = b"\x01"  # above the local bookkeeping keys (empty table name)
        while True:
            keys = cast(Iterator[bytes], self._db.keys(from_key=start))
            raw = next(iter(keys), None)
            if raw is None or len(raw) < 1 + raw[0]:
                return names
            prefix = raw[: 1 + raw[0]]
            names.append(prefix[1:].decode())
            start = _next_prefix(prefix)

    def changelog_offset(self) -> int:
        """Offset of the last changelog record reflected locally, or -1."""
        raw = self._db.get(_CHANGELOG_OFFSET)
        return -1 if raw is None else int(raw)

    def write(
        self, records: Iterable[tuple[bytes, bytes | None]], changelog_offset: int | None
    ) -> None:
        """Write changelog-shaped records (full keys; ``None`` deletes) and the offset
        of the last changelog record they reflect, atomically in one ``WriteBatch``."""
        self._db.write(self._batch(records, changelog_offset))

    def _write_unlogged(self, batch: WriteBatch, options: WriteOptions) -> None:
        self._db.write(batch, options)

    def _flush(self) -> None:
        self._db.flush(True)

    def restoring(self) -> Restoring:
        """A writer for rebuilding this store from its changelog, faster than
        :meth:`write`; use it as a context manager (see :class:`Restoring`)."""
        return Restoring(self)

    def _batch(
        self, records: Iterable[tuple[bytes, bytes | None]], changelog_offset: int | None
    ) -> WriteBatch:
        batch = WriteBatch(raw_mode=True)
        self.writes += 1
        put, delete = batch.put, batch.delete  # bound once: called per record
        for key, value in records:
            if value is None:
                delete(key)
            else:
                put(key, value)
        if changelog_offset is not None:
            put(_CHANGELOG_OFFSET, str(changelog_offset).encode())
        return batch

    def checkpoint(self, path: Path) -> None:
        """A RocksDB checkpoint of the committed state at ``path`` (hard links on the
        same disk: cheap), readable after this store moves on or closes."""
        path.parent.mkdir(parents=True, exist_ok=True)
        Checkpoint(self._db).create_checkpoint(str(path))

    def close(self) -> None:
        self._db.close()

    @staticmethod
    def destroy(path: Path) -> None:
        """Delete a partition's local state; the changelog will rebuild it."""
        shutil.rmtree(path, ignore_errors=True)


class Restoring:
    """Writes of a restore, without RocksDB's write-ahead log, made durable by a flush.

    Skipping the log saves a copy of every restored byte. It is safe because each
    batch carries the changelog offset it reaches: a crash loses only the writes
    not yet flushed to disk, and RocksDB flushes its memtables in order, so what
    survives is a prefix of the batches together with the offset of that prefix.
    The next restore reads :meth:`PartitionStore.changelog_offset` and redoes the
    rest from the changelog. The restored writes must be on disk before the task
    writes again (with the log): a crash would otherwise lose them under a later,
    logged changelog offset. So exiting flushes whatever :meth:`flush` has not,
    also after an error.
    """

    def __init__(self, store: PartitionStore) -> None:
        self._store = store
        self._options = WriteOptions()
        # rocksdict's stub declares a method; the attribute is a property (calling it fails).
        self._options.disable_wal = True  # type: ignore[method-assign, assignment]
        self._unflushed = False

    def write(self, records: Iterable[tuple[bytes, bytes | None]], changelog_offset: int) -> None:
        """Apply changelog records (``None`` deletes) up to ``changelog_offset``."""
        self._store._write_unlogged(self._store._batch(records, changelog_offset), self._options)
        self._unflushed = True

    def flush(self) -> None:
        """Write the restored state to disk. RocksDB releases the GIL meanwhile, so
        callers run it in a thread to keep their event loop going."""
        self._store._flush()
        self._unflushed = False

    def __enter__(self) -> Restoring:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._unflushed:
            self.flush()


def _next_prefix(prefix: bytes) -> bytes:
    # The smallest key above every key with this prefix. A table prefix ends in a
    # byte of a UTF-8 name, and UTF-8 never contains 0xFF, so the increment is safe.
    return prefix[:-1] + bytes([prefix[-1] + 1])


class PartitionTransaction:
    """Uncommitted changes of one checkpoint, as decoded values (cheap to re-read).

    A transaction lives as long as its task: :meth:`commit` ends one checkpoint and
    the next one starts on the same object. Tables opened with :meth:`cached` also
    keep their committed values between checkpoints (:mod:`eddy.tables.cache`);
    :meth:`discard` drops them with the changes.
    """

    def __init__(self, store: PartitionStore) -> None:
        self._store = store
        self._changes: dict[TableSpec[Any, Any], dict[Any, Any]] = {}
        self._caches: dict[TableSpec[Any, Any], CachedTable[Any, Any]] = {}

    def cached(self, table: TableSpec[K, V]) -> CachedTable[K, V]:
        """``table`` through a write-back cache kept across checkpoints: for hot state
        whose entries are deleted when done (open windows), read on most records."""
        cache = self._caches.get(table)
        if cache is None:
            cache = self._caches[table] = CachedTable(self._store, table)
        return cache

    def get(self, table: TableSpec[K, V], key: K) -> V | None:
        cache = self._caches.get(table)
        if cache is not None:
            return cache.get(key)
        changes = self._changes.get(table)
        if changes is not None and key in changes:
            value = changes[key]
            return None if value is _DELETED else value
        return self._store.get(table, key)

    def scan(
        self, table: TableSpec[K, V], lower: bytes = b"", upper: bytes | None = None
    ) -> Iterator[tuple[K, V]]:
        """Entries whose encoded key is in ``[lower, upper)``, in key order, as this
        transaction sees them: the committed ones with its own changes applied."""
        cache = self._caches.get(table)
        changes = cache.changes() if cache is not None else self._changes.get(table, {}).items()
        pending = sorted(
            (
                (raw, key, value)
                for key, value in changes
                if lower <= (raw := table.encode_key(key)) and (upper is None or raw < upper)
            ),
            key=lambda change: change[0],
        )
        at = 0
        for key, value in self._store.scan(table, lower, upper):
            raw = table.encode_key(key)
            while at < len(pending) and pending[at][0] < raw:
                yield from _live(pending[at])
                at += 1
            if at < len(pending) and pending[at][0] == raw:
                yield from _live(pending[at])  # changed here: replaces the committed value
                at += 1
                continue
            yield key, value
        for change in pending[at:]:
            yield from _live(change)

    def put(self, table: TableSpec[K, V], key: K, value: V) -> None:
        cache = self._caches.get(table)
        if cache is not None:
            cache.put(key, value)
        else:
            self._changes.setdefault(table, {})[key] = value

    def delete(self, table: TableSpec[K, V], key: K) -> None:
        cache = self._caches.get(table)
        if cache is not None:
            cache.delete(key)
        else:
            self._changes.setdefault(table, {})[key] = _DELETED

    def keys_after(
        self,
        table: TableSpec[K, V],
        after: K | None,
        limit: int | None,
        order: Callable[[K], Any],
    ) -> list[K]:
        """The first ``limit`` keys (all with None) after ``after`` (from the first
        with None), as this transaction sees them; uncached tables only.

        ``order`` must sort keys as their encodings do: it places this transaction's
        changes among the committed keys without encoding every change per call.
        """
        changes = self._changes.get(table, {})
        bound = None if after is None else order(after)
        ranked = ((order(key), key) for key, value in changes.items() if value is not _DELETED)
        puts = sorted(
            (put for put in ranked if bound is None or put[0] > bound), key=lambda put: put[0]
        )
        lower = b"" if after is None else table.encode_key(after) + b"\x00"
        committed: list[tuple[Any, K]] = []
        for key, _ in self._store.scan(table, lower):
            if key in changes:
                continue  # changed here: a put is among ``puts``, a delete is gone
            committed.append((order(key), key))
            if len(committed) == limit:
                break
        merged = (key for _, key in heapq.merge(committed, puts, key=lambda put: put[0]))
        return list(merged if limit is None else itertools.islice(merged, limit))

    def pending(self, table: TableSpec[Any, Any]) -> int:
        """Changes to ``table`` this transaction holds (uncached tables)."""
        return len(self._changes.get(table, ()))

    @property
    def cached_entries(self) -> int:
        """Values the write-back caches hold in memory."""
        return sum(len(cache) for cache in self._caches.values())

    @property
    def dirty(self) -> bool:
        return any(self._changes.values()) or any(c.dirty for c in self._caches.values())

    def changelog_records(self) -> list[tuple[bytes, bytes | None]]:
        """The changes as changelog records: encoded full key, value or tombstone."""
        records: list[tuple[bytes, bytes | None]] = []
        for table, changes in self._changes.items():
            full_key, encode = table.full_key, table.encode_value
            for key, value in changes.items():
                records.append((full_key(key), None if value is _DELETED else encode(value)))
        for cache in self._caches.values():
            records += cache.changelog_records()
        return records

    def commit(
        self, records: list[tuple[bytes, bytes | None]], changelog_offset: int | None
    ) -> None:
        """Write the checkpoint's records and changelog offset in one ``WriteBatch``."""
        self._store.write(records, changelog_offset)
        self._changes.clear()
        for cache in self._caches.values():
            cache.committed()

    def discard(self) -> None:
        """Forget the checkpoint in progress, and every cached value with it."""
        self._changes.clear()
        for cache in self._caches.values():
            cache.drop()


class WatchedTransaction(PartitionTransaction):
    """A transaction that remembers which entries changed since its last :meth:`check`.

    State is encoded once per checkpoint, not once per change (an open window
    changes on every record and is written once), so a value that cannot be
    encoded is found only at the checkpoint, among the changes of every record
    since the last one. To find the record that caused it, the runtime replays
    those records through a watched transaction and checks after each: only the
    entries that record changed are encoded. A subclass, so the transaction of
    every other checkpoint pays nothing for it.
    """

    def __init__(self, store: PartitionStore) -> None:
        super().__init__(store)
        self._touched: dict[tuple[TableSpec[Any, Any], Any], None] = {}
        #: False once the replay is over: changes are not remembered any more.
        self.watching = True

    def cached(self, table: TableSpec[K, V]) -> CachedTable[K, V]:
        cache = self._caches.get(table)
        if cache is None:
            cache = self._caches[table] = WatchedCachedTable(self._store, table, self._touch)
        return cache

    def put(self, table: TableSpec[K, V], key: K, value: V) -> None:
        super().put(table, key, value)
        self._touch(table, key)

    def delete(self, table: TableSpec[K, V], key: K) -> None:
        super().delete(table, key)
        self._touch(table, key)

    def _touch(self, table: TableSpec[Any, Any], key: Any) -> None:
        if self.watching:
            self._touched[(table, key)] = None

    def check(self) -> None:
        """Encode every entry changed since the last check, and forget them.

        Raises:
            UnwritableStateError: one of them cannot be encoded.
        """
        touched = list(self._touched)
        self._touched.clear()
        for table, key in touched:
            cache = self._caches.get(table)
            if cache is not None:
                value = cache.peek(key, _MISSING)
            else:
                value = self._changes.get(table, {}).get(key, _MISSING)
            try:
                table.full_key(key)
                if value is not _MISSING and value is not _DELETED:
                    table.encode_value(value)
            except ENCODE_ERRORS as exc:
                where = f"table {table.name!r}, key {shortened(repr(key), 80)}"
                raise UnwritableStateError(f"{where}: {shortened(str(exc))}") from None

    def discard(self) -> None:
        super().discard()
        self._touched.clear()


def _live(change: tuple[bytes, Any, Any]) -> Iterator[tuple[Any, Any]]:
    _, key, value = change
    if value is not _DELETED:
        yield key, value
