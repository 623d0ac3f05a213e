"""The partition stores a runtime has on local disk, open or not."""

from __future__ import annotations

from pathlib import Path

from eddy.tables.store import PartitionStore


class LocalStores:
    """Opens stores on demand and remembers how complete the closed ones are, so a
    worker can tell the group which partitions it could take over cheaply."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._open: dict[int, PartitionStore] = {}
        self._closed_offsets: dict[int, int] = {}

    def discover(self) -> None:
        """Note the changelog offset of every partition left on disk by an earlier run."""
        if not self.root.is_dir():
            return
        for child in self.root.iterdir():
            if child.is_dir() and child.name.isdigit() and int(child.name) not in self._open:
                store = PartitionStore(child)
                self._closed_offsets[int(child.name)] = store.changelog_offset()
                store.close()

    def path(self, partition: int) -> Path:
        return self.root / str(partition)

    def get(self, partition: int) -> PartitionStore | None:
        return self._open.get(partition)

    def open(self, partition: int) -> PartitionStore:
        store = self._open.get(partition)
        if store is None:
            store = self._open[partition] = PartitionStore(self.path(partition))
            self._closed_offsets.pop(partition, None)
        return store

    def wipe(self, partition: int) -> PartitionStore:
        """Delete a partition's local copy and start an empty one."""
        store = self._open.pop(partition, None)
        if store is not None:
            store.close()
        PartitionStore.destroy(self.path(partition))
        self._closed_offsets.pop(partition, None)
        return self.open(partition)

    def close(self, partition: int) -> None:
        store = self._open.pop(partition, None)
        if store is not None:
            self._closed_offsets[partition] = store.changelog_offset()
            store.close()

    def close_all(self) -> None:
        for partition in list(self._open):
            self.close(partition)

    def keep_only(self, partitions: set[int]) -> None:
        for partition in set(self._open) - partitions:
            self.close(partition)

    def offsets(self) -> dict[int, int]:
        """Changelog offset of every local copy, open or closed (-1: empty)."""
        offsets = dict(self._closed_offsets)
        offsets.update({p: s.changelog_offset() for p, s in self._open.items()})
        return offsets

    def __contains__(self, partition: int) -> bool:
        return partition in self._open
