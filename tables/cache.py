"""A write-back cache of one table of one partition, as decoded values.

Open windows are read and written on nearly every record, and a window lives
across many checkpoints (a 5 s window spans 50 commits at 100 ms). Without a
cache, the first read of a window in each checkpoint goes to RocksDB and decodes
its JSON again, and at 100 ms commits that is most reads. The cache keeps every
value it has seen, committed or not: reads hit it first, and the checkpoint
writes each entry changed since the last one exactly once, to the changelog and
to the ``WriteBatch``, however many times it changed in between.

Values are handed out live (the window operator changes an entry in place and
puts it back), so a cached value may hold changes that never committed. The
cache is therefore dropped whole with the transaction it belongs to when that
aborts, and the next read goes back to the committed store.

Encoding once per checkpoint means a value that cannot be encoded (a sum that
overflowed to infinity) is found there, not at the record that made it: the
runtime then replays the checkpoint's records through :class:`WatchedCachedTable`
(tables/store.py, ``WatchedTransaction``), which checks each record's changes.

Memory is the table's live entries, up to ``MAX_CLEAN_ENTRIES``: past that, each
checkpoint forgets the entries cached longest ago (all clean by then; their next
read decodes them from RocksDB again). Without the bound a partition with a
million keys kept a million open windows as Python objects (about 400 bytes
each with their keys; ``bench.memory``). Use it for state that is deleted when
done (open windows, sessions), not for state that grows with every key ever seen.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:
    from eddy.tables.store import PartitionStore, TableSpec

K = TypeVar("K")
V = TypeVar("V")

DELETED: Any = object()  # a deletion not committed yet
MISSING: Any = object()  # not in the cache
# Entries one table of one partition keeps between checkpoints. Far above the open
# windows of a partition with thousands of keys, so those never go back to RocksDB.
MAX_CLEAN_ENTRIES = 20_000


class CachedTable(Generic[K, V]):
    """Decoded values of one table, with those changed since the last checkpoint."""

    def __init__(
        self,
        store: PartitionStore,
        table: TableSpec[K, V],
        max_clean_entries: int = MAX_CLEAN_ENTRIES,
    ) -> None:
        self.table = table
        self.max_clean_entries = max_clean_entries
        self._store = store
        self._values: dict[K, Any] = {}
        # Insertion-ordered, so a checkpoint's changelog records come out in the
        # order the changes were made (deterministic, unlike a set of tuples).
        self._dirty: dict[K, None] = {}
        self._full_keys: dict[K, bytes] = {}  # encoded once per entry
        #: ``peek(key, MISSING)``: what the cache holds for ``key`` (a value, DELETED
        #: or MISSING), as a plain dict lookup: the hot path of a caller that reads
        #: on every record, which asks :meth:`get` when it is not a value.
        self.peek = self._values.get

    def get(self, key: K) -> V | None:
        value = self._values.get(key, MISSING)
        if value is MISSING:
            stored = self._store.get(self.table, key)
            if stored is not None:
                self._values[key] = stored
            return stored
        return None if value is DELETED else cast(V, value)

    def put(self, key: K, value: V) -> None:
        self._values[key] = value
        self._dirty[key] = None

    def delete(self, key: K) -> None:
        self._values[key] = DELETED
        self._dirty[key] = None

    @property
    def dirty(self) -> bool:
        return bool(self._dirty)

    def changes(self) -> list[tuple[K, Any]]:
        """``(key, value or DELETED)`` of every entry changed since the last checkpoint."""
        values = self._values
        return [(key, values[key]) for key in self._dirty]

    def changelog_records(self) -> list[tuple[bytes, bytes | None]]:
        """The changed entries as changelog records (full key, value or tombstone).

        An open window is written at every checkpoint it changed in, so its encoded
        key is kept with it rather than encoded each time.
        """
        values, full_keys, table = self._values, self._full_keys, self.table
        records: list[tuple[bytes, bytes | None]] = []
        for key in self._dirty:
            full_key = full_keys.get(key)
            if full_key is None:
                full_key = full_keys[key] = table.full_key(key)
            value = values[key]
            records.append((full_key, None if value is DELETED else table.encode_value(value)))
        return records

    def committed(self) -> None:
        """The checkpoint is written: changed entries are clean, deleted ones forgotten."""
        values = self._values
        for key in self._dirty:
            if values[key] is DELETED:
                del values[key]
                self._full_keys.pop(key, None)
        self._dirty.clear()
        self._evict()

    def _evict(self) -> None:
        """Past ``max_clean_entries``, forget the entries cached longest ago. Called
        with every entry clean, so nothing is lost: RocksDB has each one's value."""
        excess = len(self._values) - self.max_clean_entries
        if excess <= 0:
            return
        values, full_keys = self._values, self._full_keys
        for key in list(islice(values, excess)):
            del values[key]
            full_keys.pop(key, None)

    def drop(self) -> None:
        """Forget everything: the transaction aborted, and live values may hold its changes."""
        self._values.clear()
        self._dirty.clear()
        self._full_keys.clear()

    def __len__(self) -> int:
        """Entries held in memory (committed, changed or deleted)."""
        return len(self._values)


class WatchedCachedTable(CachedTable[K, V]):
    """A cached table that tells ``touched`` which keys each change names: the careful
    replay of :class:`eddy.tables.store.WatchedTransaction` checks those after every record.
    A subclass, so the ordinary table pays nothing for it."""

    def __init__(
        self,
        store: PartitionStore,
        table: TableSpec[K, V],
        touched: Callable[[TableSpec[K, V], K], None],
    ) -> None:
        super().__init__(store, table)
        self._touched = touched

    def put(self, key: K, value: V) -> None:
        super().put(key, value)
        self._touched(self.table, key)

    def delete(self, key: K) -> None:
        super().delete(key)
        self._touched(self.table, key)
