"""Reading another process's partition store: a RocksDB secondary instance.

The query plane (``service/plane``) answers REST queries in a process of its own,
so that queries take no CPU from ingest. It reads each partition's store through
a *secondary* instance: a read-only view of the primary's files that follows the
primary's MANIFEST and write-ahead log when asked (:meth:`SecondaryStore.catch_up`).

What a secondary can see is what the primary wrote, and the primary (the ingest
process) writes a partition's store only after the Kafka transaction of the
checkpoint committed, in one ``WriteBatch``. A ``WriteBatch`` is one record of the
write-ahead log, and a secondary replays whole records only, so it sees a
checkpoint entirely or not at all (``tests/unit/test_tables_secondary.py`` reads a
store while another process writes it). It never sees a checkpoint in progress.

A secondary does not notice that the primary deleted its directory and started
again (a wiped partition): it goes on showing the files it had open. Whoever
holds one reopens it when the primary reopens the partition.

Nor does a secondary (RocksDB 9.8) follow a flush well: if the primary wrote to a
write-ahead log after the secondary's last catch-up, then flushed that memtable to
a table file (a snapshot's checkpoint, a full memtable) and started a new log, the
secondary keeps the memtable it replayed from the old log, and a point read finds
the old value there before it looks at the new file, for as long as the instance
lives. So :meth:`SecondaryStore.catch_up` reopens the instance when the primary
started a new log since it last opened it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from rocksdict import AccessType, Options, Rdict

from eddy.tables.budget import within_budget
from eddy.tables.store import PartitionStore


class ReadOnlyStoreError(RuntimeError):
    """Something tried to write through a secondary instance: a bug in the caller."""


class SecondaryStore(PartitionStore):
    """A read-only, caught-up-on-demand view of a partition store another process owns.

    The reads (``get``, ``scan``, ``last``, ``table_names``, ``changelog_offset``) are
    :class:`PartitionStore`'s own, so a query reads exactly what it would read in
    the ingest process.
    """

    def __init__(self, path: Path, secondary_path: Path) -> None:
        """Args:
        path: the primary's directory.
        secondary_path: a directory of this instance's own (RocksDB keeps its info
            log there); emptied first.
        """
        # Not PartitionStore.__init__: it opens the directory read-write (and takes
        # the primary's lock). The attributes it sets are set here instead; the
        # tests read through every method, so a new one cannot be missed silently.
        self.path = path
        self._secondary_path = secondary_path
        self._db, self._log = self._open()
        self.reads = 0
        self.writes = 0
        self.keys_scanned = 0

    def _open(self) -> tuple[Rdict, int]:
        """A fresh instance, and the primary's newest write-ahead log as of just
        before it opened (a log started while it opens makes the next catch-up
        reopen it: one reopen too many at worst, never a stale read)."""
        log = newest_log(self.path)
        shutil.rmtree(self._secondary_path, ignore_errors=True)
        self._secondary_path.mkdir(parents=True, exist_ok=True)
        options = within_budget(Options(raw_mode=True))
        # A secondary must keep every file open: the primary may delete an SST file
        # after a compaction while this instance still reads it.
        options.set_max_open_files(-1)
        secondary = AccessType.secondary(str(self._secondary_path))
        return Rdict(str(self.path), options, access_type=secondary), log

    def catch_up(self) -> None:
        """Apply what the primary wrote since the last catch-up (cheap when nothing
        was: a few microseconds, and one directory listing); reopen instead when the
        primary flushed since this instance opened (see the module's docstring)."""
        self._db.try_catch_up_with_primary()
        if newest_log(self.path) != self._log:
            self._db.close()
            self._db, self._log = self._open()

    def write(
        self, records: Iterable[tuple[bytes, bytes | None]], changelog_offset: int | None
    ) -> None:
        raise ReadOnlyStoreError(f"{self.path} is read through a secondary instance")

    def checkpoint(self, path: Path) -> None:
        raise ReadOnlyStoreError(f"{self.path} is read through a secondary instance")


def newest_log(path: Path) -> int:
    """The number of the newest write-ahead log (``000008.log``) in a store's
    directory; -1 if there is none."""
    numbers = [
        int(entry.name[:-4])
        for entry in os.scandir(path)
        if entry.name.endswith(".log") and entry.name[:-4].isdigit()
    ]
    return max(numbers, default=-1)
