"""The query plane's view of one stage: the partitions this host's ingest processes
serve, read through secondary instances of their stores.

Per query: the ingest processes' reports say which process serves the key's
partition (one ``stat`` each when nothing changed); that store's secondary is
caught up with its primary if the report changed since it last was (and the
catch-up interval has passed), and read; then the
report is checked again, and if the partition was closed or reopened meanwhile the
answer is a 503 instead of what was read (a restore may have been rewriting it).
"""

from __future__ import annotations

import itertools
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from eddy.app.queries import Freshness, PartitionUnavailableError, ServedPartition
from eddy.plane.status import Partition, Report, ReportFile, Stage
from eddy.tables.secondary import SecondaryStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CaughtUp:
    """A secondary's last catch-up: the report it followed, the claim that report
    made on the partition (what an answer read from it reflects), and when."""

    as_of: object
    claim: Partition
    at_s: float


class Secondaries:
    """One secondary instance per store the query plane reads, opened on first read
    and again when its primary reopens the partition (a new epoch)."""

    def __init__(
        self,
        root: Path,
        catch_up_interval_ms: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args:
        catch_up_interval_ms: the least time between two catch-ups of one store
            (0: at each new report). A catch-up costs milliseconds of CPU (RocksDB
            reads the primary's MANIFEST and write-ahead log), and a store's report
            changes at each checkpoint; answers say which checkpoint they read.
        clock: monotonic seconds (a fake one in tests).
        """
        self._root = root
        shutil.rmtree(root, ignore_errors=True)  # a previous run's instances
        self._open: dict[str, tuple[tuple[int, int], SecondaryStore]] = {}
        self._caught_up: dict[str, CaughtUp] = {}
        self._interval_s = catch_up_interval_ms / 1_000
        self._clock = clock
        self._names = itertools.count()

    def caught_up(
        self, claim: Partition, pid: int, partition: int, as_of: object = None
    ) -> tuple[SecondaryStore, Partition]:
        """The secondary of the store ``claim`` names, caught up with its primary,
        and the claim it reflects (``claim``, or the one of its last catch-up).

        ``as_of``: the identity of the report that made ``claim``. A primary writes
        its store at a checkpoint and then its report, so a secondary caught up
        after that report was written holds that checkpoint at least; while the
        report is unchanged, catching up again would only replay a checkpoint the
        report does not show yet (None: always catch up). A new report is followed
        once the catch-up interval has passed since the last catch-up.

        Raises:
            PartitionUnavailableError: the store cannot be opened or followed now
                (its process is reopening it).
        """
        path = claim.path
        held = self._open.get(path)
        try:
            if held is not None and held[0] == (pid, claim.epoch):
                store = held[1]
            else:
                if held is not None:
                    held[1].close()
                    del self._open[path]
                    self._caught_up.pop(path, None)
                store = SecondaryStore(Path(path), self._root / str(next(self._names)))
                self._open[path] = ((pid, claim.epoch), store)
            last = self._caught_up.get(path)
            now_s = self._clock()
            if last is None or as_of is None or self._due(last, as_of, now_s):
                store.catch_up()
                last = self._caught_up[path] = CaughtUp(as_of, claim, now_s)
        # rocksdict raises plain Exceptions (IO errors of RocksDB): a store its
        # process is wiping or moving; the next request opens it afresh.
        except Exception as exc:
            self._drop(path)
            log.info("cannot read %s through a secondary instance: %r", path, exc)
            raise PartitionUnavailableError(
                f"partition {partition} is being reopened", partition, retry_after_s=1
            ) from None
        return store, last.claim

    def _due(self, last: CaughtUp, as_of: object, now_s: float) -> bool:
        return last.as_of != as_of and now_s - last.at_s >= self._interval_s

    def keep_only(self, paths: set[str]) -> None:
        """Close the instances of stores no ingest process serves any more."""
        for path in set(self._open) - paths:
            self._drop(path)

    def close(self) -> None:
        for path in list(self._open):
            self._drop(path)

    def _drop(self, path: str) -> None:
        self._caught_up.pop(path, None)
        held = self._open.pop(path, None)
        if held is not None:
            held[1].close()


@dataclass(frozen=True)
class Served:
    """A report's claim on one partition, with the file it came from."""

    file: ReportFile
    identity: tuple[int, int, int] | None
    report: Report
    partition: Partition


class LocalStage:
    """:class:`~eddy.app.queries.ServedStage` over the reports of this host's
    ingest processes, for one stage."""

    def __init__(
        self,
        name: str,
        reports: Sequence[tuple[ReportFile, tuple[int, int, int] | None, Report]],
        secondaries: Secondaries,
        endpoint: str | None,
    ) -> None:
        """Args:
        reports: each live ingest process's file, the identity its report was read
            at, and the report.
        """
        self.name = name
        self._secondaries = secondaries
        self._endpoint = endpoint
        self._stages: list[Stage] = []
        self._newest: Stage | None = None
        self._running: dict[int, Served] = {}
        self._restoring: set[int] = set()
        newest_ms = -1
        for file, identity, report in reports:
            stage = report.stages.get(name)
            if stage is None:
                continue
            self._stages.append(stage)
            if report.written_ms > newest_ms:
                self._newest, newest_ms = stage, report.written_ms
            for number, partition in stage.partitions.items():
                if partition.state == "restoring":
                    self._restoring.add(number)
                else:
                    self._running[number] = Served(file, identity, report, partition)

    @property
    def partition_count(self) -> int:
        return max((stage.partition_count for stage in self._stages), default=0)

    @property
    def endpoint(self) -> str | None:
        return self._endpoint

    @property
    def stages(self) -> list[Stage]:
        """The stage as each ingest process running it reports it."""
        return self._stages

    def restoring(self, partition: int) -> bool:
        if partition in self._restoring:
            return True
        not_assigned_yet = not self._stages or not all(s.assigned_once for s in self._stages)
        return partition not in self._running and not_assigned_yet

    def serve(self, partition: int) -> ServedPartition | None:
        served = self._running.get(partition)
        if served is None:
            return None
        store, claim = self._secondaries.caught_up(
            served.partition, served.report.pid, partition, served.identity
        )
        return ServedPartition(
            partition,
            store,
            Freshness(partition, claim.watermark_ms, dict(claim.committed_offsets)),
            confirm=lambda: self._confirm(partition, served),
        )

    def served(self) -> list[int]:
        return sorted(self._running)

    def restoring_here(self) -> list[int]:
        """Partitions an ingest process of this host is restoring (or retrying)."""
        return sorted(self._restoring - set(self._running))

    def running(self) -> dict[int, Partition]:
        """Every partition served here, as reported."""
        return {p: served.partition for p, served in sorted(self._running.items())}

    def owner_of(self, partition: int) -> str | None:
        return None if self._newest is None else self._newest.owners.get(partition)

    def owners(self) -> dict[int, str | None]:
        return {p: self.owner_of(p) for p in range(self.partition_count)}

    def _confirm(self, partition: int, served: Served) -> None:
        """Raise unless the partition is still served as it was when it was read."""
        if served.file.identity() == served.identity:
            return
        report = served.file.current()
        stage = None if report is None else report.stages.get(self.name)
        now = None if stage is None else stage.partitions.get(partition)
        if (
            report is None
            or report.pid != served.report.pid
            or now is None
            or now.state != "running"
            or now.epoch != served.partition.epoch
        ):
            raise PartitionUnavailableError(
                f"partition {partition} moved while it was read", partition, retry_after_s=1
            )
