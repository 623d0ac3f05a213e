"""What an ingest process tells the query plane, in two files the query plane reads.

Each ingest process of ``eddy worker`` writes ``<index>.json``: per stage, the
partitions it serves (or is restoring), where their stores are, how fresh their
committed state is, the group's owner of every partition, and its counters; and
``<index>.prom``, its Prometheus metrics. The query plane reads the stores
themselves through RocksDB secondary instances (``tables/secondary.py``), so a
query costs ingest nothing: ingest only writes a small file per checkpoint.

The order of writes is what keeps answers committed and restores invisible:

* a partition leaves the file, or turns ``restoring``, *before* anything touches its
  store (:meth:`StatusWriter.changed` with ``urgent``: written at once, in the
  caller), and the query plane checks the file again after reading a store;
* a checkpoint's write comes after its ``WriteBatch``, so the freshness an answer
  reports is never ahead of the state it read (the state may be newer).

Every write replaces the file (``os.replace``): a reader sees the old file or the new
one, never part of one, and tells them apart by the file's identity (inode, mtime).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
from prometheus_client import CollectorRegistry, generate_latest

from eddy.eventtime import MIN_WATERMARK
from eddy.runtime.engine import PipelineRuntime

log = logging.getLogger(__name__)

# Counters GET /status shows per stage, by the sample name they are read from.
COUNTERS = {
    "records_in": "eddy_records_in_total",
    "windows_emitted": "eddy_windows_emitted_total",
    "late_records": "eddy_late_records_total",
    "dead_letters": "eddy_dead_letters_total",
    "commits": "eddy_commits_total",
}
# Metrics and counters are for people and Prometheus: once a second is enough.
PERIOD_S = 1.0

State = Literal["running", "restoring"]


@dataclass(frozen=True)
class Partition:
    """One partition as its ingest process serves it."""

    state: State
    # Bumped each time the partition starts being served (opened, reopened): a
    # reader holding a secondary instance of an older epoch must open a new one,
    # the primary may have wiped and rebuilt the store.
    epoch: int
    path: str  # the store's directory ("" while restoring)
    watermark_ms: int | None
    committed_offsets: Mapping[str, int]


@dataclass(frozen=True)
class Stage:
    """One stage in one ingest process."""

    agent: str
    partition_count: int
    assigned_once: bool
    ready: bool
    partitions: Mapping[int, Partition]
    owners: Mapping[int, str]  # the group's assignment: partition -> API endpoint
    counters: Mapping[str, float]


@dataclass(frozen=True)
class Report:
    """Everything one ingest process says about itself."""

    pid: int
    worker_id: str
    control_url: str | None  # its private API, for the query plane's control calls
    started: bool
    ready: bool  # every stage restored (its /readyz)
    live: bool  # every loop runs (its /healthz)
    written_ms: int
    stages: Mapping[str, Stage]


# -- the ingest side ------------------------------------------------------------------


class StatusWriter:
    """Keeps ``<index>.json`` and ``<index>.prom`` up to date in an ingest process."""

    def __init__(
        self,
        directory: Path,
        index: int,
        *,
        worker_id: str,
        runtimes: Callable[[], Mapping[str, PipelineRuntime]],
        agent_of: Callable[[str], str],
        registry: CollectorRegistry,
        health: Callable[[], tuple[bool, bool, bool]],
        control_url: Callable[[], str | None],
    ) -> None:
        """Args:
        health: (started, ready, live) of the worker.
        control_url: the worker's private API, once it listens.
        """
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{index}.json"
        self.metrics_path = directory / f"{index}.prom"
        self._worker_id = worker_id
        self._runtimes = runtimes
        self._agent_of = agent_of
        self._registry = registry
        self._health = health
        self._control_url = control_url
        self._epochs: dict[tuple[str, int], int] = {}
        self._states: dict[tuple[str, int], State] = {}
        self._counters: dict[str, dict[str, float]] = {}
        self._scheduled = False
        self._metrics_due = False

    def changed(self, runtime: PipelineRuntime, urgent: bool) -> None:
        """A stage's served partitions changed (``urgent``: its stores are about to be
        touched, so write now) or it checkpointed (write soon: one write for the
        checkpoints of every stage that commits in this turn of the loop)."""
        if urgent:
            self.write()
            # Restoring and owned partitions are metrics too (eddy_restoring_partitions):
            # a restore is seen as it starts and ends, not a second later.
            self._metrics_due = True
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._write_scheduled)

    def _write_scheduled(self) -> None:
        self._scheduled = False
        try:
            self.write()
            if self._metrics_due:
                self._metrics_due = False
                self.write_metrics()
        except OSError as exc:  # a full disk must not stop ingest; queries go stale
            log.warning("cannot write the query plane's status: %r", exc)

    async def run(self) -> None:
        """Counters, metrics and health once a second, until cancelled."""
        while True:
            try:
                self._counters = counters_by_stage(self._registry)
                self.write()
                self.write_metrics()
            except OSError as exc:  # as above
                log.warning("cannot write the query plane's status: %r", exc)
            await asyncio.sleep(PERIOD_S)

    def write_metrics(self) -> None:
        _replace(self.metrics_path, generate_latest(self._registry))

    def write(self) -> None:
        _replace(self.path, orjson.dumps(self.report(), option=orjson.OPT_NON_STR_KEYS))

    def report(self) -> dict[str, Any]:
        started, ready, live = self._health()
        return {
            "pid": os.getpid(),
            "worker_id": self._worker_id,
            "control_url": self._control_url(),
            "started": started,
            "ready": ready,
            "live": live,
            "written_ms": int(time.time() * 1000),
            "stages": {name: self._stage(name, rt) for name, rt in self._runtimes().items()},
        }

    def _stage(self, name: str, runtime: PipelineRuntime) -> dict[str, Any]:
        partitions: dict[int, dict[str, Any]] = {}
        for partition in sorted(runtime.restoring):
            partitions[partition] = self._partition(name, partition, "restoring")
        for partition, task in sorted(runtime.tasks.items()):
            if partition in runtime.restoring:
                continue
            watermark = task.logic.watermark_ms
            partitions[partition] = {
                **self._partition(name, partition, "running"),
                "path": str(runtime.stores.path(partition)),
                "watermark_ms": None if watermark == MIN_WATERMARK else watermark,
                "committed_offsets": {tp.topic: o for tp, o in task.committed_offsets.items()},
            }
        for key in [k for k in self._states if k[0] == name and k[1] not in partitions]:
            del self._states[key]
        return {
            "agent": self._agent_of(name),
            "partition_count": runtime.partition_count,
            "assigned_once": runtime.assigned_once,
            "ready": runtime.ready,
            "partitions": partitions,
            "owners": runtime.owners(),
            "counters": self._counters.get(name, {}),
        }

    def _partition(self, stage: str, partition: int, state: State) -> dict[str, Any]:
        key = (stage, partition)
        if state == "running" and self._states.get(key) != "running":
            self._epochs[key] = self._epochs.get(key, 0) + 1
        self._states[key] = state
        return {
            "state": state,
            "epoch": self._epochs.get(key, 0),
            "path": "",
            "watermark_ms": None,
            "committed_offsets": {},
        }


def counters_by_stage(registry: CollectorRegistry) -> dict[str, dict[str, float]]:
    """:data:`COUNTERS` per stage, in one pass over the registry."""
    wanted = {sample: field for field, sample in COUNTERS.items()}
    found: dict[str, dict[str, float]] = {}
    for family in registry.collect():
        for sample in family.samples:
            field = wanted.get(sample.name)
            stage = sample.labels.get("stage")
            if field is None or stage is None:
                continue
            counters = found.setdefault(stage, dict.fromkeys(COUNTERS, 0.0))
            counters[field] += sample.value
    return found


SHARED_MEMORY = Path("/dev/shm")


def reports_dir(query_home: Path, shared_memory: Path = SHARED_MEMORY) -> Path:
    """Where a worker's ingest processes write their reports for its query process.

    In shared memory (a tmpfs; every Linux host and Kubernetes pod has one) when it
    is writable, else under ``query_home``. Each process rewrites its report after
    every checkpoint; on a disk, ext4 writes a file renamed over another out at
    once, and under ingest's own RocksDB writes that took 1 to 7 % of an ingest
    process's CPU. One directory per worker: named after its state directory.
    """
    if shared_memory.is_dir() and os.access(shared_memory, os.W_OK | os.X_OK):
        digest = hashlib.sha256(str(query_home.resolve()).encode()).hexdigest()[:16]
        return shared_memory / f"eddy-{digest}"
    return query_home / "status"


OWNER = "owner.pid"  # in a reports directory: the query process that made it


def claim_reports_dir(directory: Path, pid: int | None = None) -> None:
    """Make ``directory`` this worker's, after removing its neighbours that belong
    to no running process.

    A worker removes its reports directory when it stops; one killed with
    ``kill -9`` cannot, and in shared memory its files would stay for the life of
    the host (reused only by a worker with the same state directory).
    """
    pid = os.getpid() if pid is None else pid
    for other in directory.parent.glob("eddy-*"):
        owner = _owner(other / OWNER)
        if other != directory and owner is not None and not _running(owner):
            shutil.rmtree(other, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / OWNER).write_text(str(pid))


def _owner(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None  # not a reports directory, or not ours to judge


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _replace(path: Path, data: bytes) -> None:
    """Write ``path`` whole: a reader sees the old content or the new."""
    scratch = path.with_name(f".{path.name}.{os.getpid()}")
    scratch.write_bytes(data)
    os.replace(scratch, path)


# -- the query plane's side -----------------------------------------------------------


class ReportFile:
    """One ingest process's ``<index>.json``, read again only when it changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._identity: tuple[int, int, int] | None = None
        self._report: Report | None = None

    def current(self) -> Report | None:
        """The latest report (None: none written yet, or unreadable)."""
        identity = self.identity()
        if identity != self._identity:
            self._identity = identity
            self._report = self._read() if identity is not None else None
        return self._report

    @property
    def seen(self) -> tuple[int, int, int] | None:
        """The identity of the file :meth:`current` last read."""
        return self._identity

    def identity(self) -> tuple[int, int, int] | None:
        """What changes with every write: a check costs one ``stat``."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return None
        return stat.st_ino, stat.st_mtime_ns, stat.st_size

    def forget(self) -> None:
        """The process is gone: its last report no longer holds."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._identity = None
        self._report = None

    def _read(self) -> Report | None:
        try:
            return parse(orjson.loads(self.path.read_bytes()))
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            # Replaced whole, so never half-written; another Eddy version, maybe.
            log.warning("unreadable status %s: %r", self.path, exc)
            return None


def parse(data: Mapping[str, Any]) -> Report:
    """A report from its JSON form (:meth:`StatusWriter.report`)."""
    return Report(
        pid=int(data["pid"]),
        worker_id=str(data["worker_id"]),
        control_url=data["control_url"],
        started=bool(data["started"]),
        ready=bool(data["ready"]),
        live=bool(data["live"]),
        written_ms=int(data["written_ms"]),
        stages={name: _stage(stage) for name, stage in data["stages"].items()},
    )


def _stage(data: Mapping[str, Any]) -> Stage:
    return Stage(
        agent=str(data["agent"]),
        partition_count=int(data["partition_count"]),
        assigned_once=bool(data["assigned_once"]),
        ready=bool(data["ready"]),
        partitions={
            int(p): Partition(
                state="running" if part["state"] == "running" else "restoring",
                epoch=int(part["epoch"]),
                path=str(part["path"]),
                watermark_ms=part["watermark_ms"],
                committed_offsets=dict(part["committed_offsets"]),
            )
            for p, part in data["partitions"].items()
        },
        owners={int(p): str(url) for p, url in data["owners"].items()},
        counters=dict(data["counters"]),
    )
