"""Injecting a schedule's faults into a running cluster, one at a time.

Faults fire as the input's progress crosses their point; while one is in
progress the feeder may run on only up to the next fault's point, so every
fault lands mid-stream. Each returns a :class:`FaultRecord` with what happened
and how long recovery took (spawn -> ``/readyz`` 200 for a restarted worker).
Anything the runtime did that it should not (a worker ignoring SIGTERM, a
non-zero exit after SIGTERM, no progress after the broker came back) becomes a
*finding*, which fails the run's verdict. The network faults of a fleet run are
``tools.fleet.faults``'s; they use the helpers here (``pick``, ``terminate``...).
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rich.console import Console

from eddy.errors import LocalKafkaError
from tools import localkafka
from tools.chaos.cluster import Cluster, WorkerDown, WorkerProc, excerpt
from tools.chaos.errors import ChaosError
from tools.chaos.kafkaio import Feeder, GroupLag
from tools.chaos.schedule import NETWORK_KINDS, Fault, FaultKind, RunConfig
from tools.localkafka.cluster import Brokers
from tools.localkafka.cluster import leaders as partition_leaders

TERM_TIMEOUT_S = 30.0
PROGRESS_TIMEOUT_S = 120.0


@dataclass
class FaultRecord:
    index: int
    kind: str
    planned_at: float
    progress: float = 0.0
    worker: str | None = None
    started_s: float = 0.0
    duration_s: float = 0.0
    recovery_s: float | None = None
    landed: bool = True
    notes: list[str] = field(default_factory=list)


@dataclass
class Finding:
    """Something the runtime did wrong under a fault, with the evidence."""

    fault: int | None
    what: str
    log_path: str | None = None
    excerpt: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LeaderKills:
    """A run on a cluster: its broker faults kill the leader of a ``topic`` partition."""

    brokers: Brokers
    topic: str


class NetworkFaults(Protocol):
    """A fleet's network faults (``tools.fleet.faults``): cut links, isolated brokers."""

    def inject(self, injector: Injector, fault: Fault, record: FaultRecord) -> Awaitable[None]: ...


class Injector:
    def __init__(
        self,
        config: RunConfig,
        faults: tuple[Fault, ...],
        cluster: Cluster,
        feeder: Feeder,
        groups: GroupLag,
        run_dir: Path,
        on_change: Callable[[str], None] = lambda _: None,
        brokers: LeaderKills | None = None,
        network: NetworkFaults | None = None,
    ) -> None:
        self.config = config
        self.network = network
        self.brokers = brokers
        self.faults = faults
        self.cluster = cluster
        self.feeder = feeder
        self.groups = groups
        self.run_dir = run_dir
        self.on_change = on_change
        self.records: list[FaultRecord] = []
        self.findings: list[Finding] = []
        self._points = [self._point(f.at_fraction) for f in faults]
        # Until the first fault fires, the input may only reach its point.
        feeder.set_limit(self._points[0] if self._points else feeder.total)

    def _point(self, fraction: float) -> int:
        return math.ceil(fraction * self.feeder.total)

    async def run(self) -> None:
        points = self._points
        for i, fault in enumerate(self.faults):
            await self.feeder.wait_acked(points[i])
            self.feeder.set_limit(points[i + 1] if i + 1 < len(points) else self.feeder.total)
            record = FaultRecord(i, fault.kind.value, fault.at_fraction)
            record.progress = round(self.feeder.acked / self.feeder.total, 4)
            record.started_s = round(time.monotonic() - self.cluster.started, 1)
            self.on_change(f"fault {i + 1}/{len(self.faults)}: {fault.kind.value}")
            began = time.monotonic()
            try:
                await self._inject(fault, record)
            except WorkerDown as exc:
                record.notes.append(str(exc))
                await self._stuck(record, f"{fault.kind.value}: {exc}")
            record.duration_s = round(time.monotonic() - began, 1)
            self.records.append(record)
        self.feeder.set_limit(self.feeder.total)
        self.on_change("faults done")

    # -- the faults ----------------------------------------------------------------------

    async def _inject(self, fault: Fault, record: FaultRecord) -> None:
        kind = fault.kind
        if kind in NETWORK_KINDS:
            if self.network is None:
                raise ChaosError(f"{kind.value} is a network fault: run it on a fleet")
            await self.network.inject(self, fault, record)
            return
        if kind is FaultKind.BROKER:
            await self._broker(fault, record)
            return
        if kind is FaultKind.JOIN:
            await self._join(record)
            return
        if kind is FaultKind.LEAVE:
            await self._leave(fault, record)
            return
        if kind is FaultKind.ZOMBIE:
            await self._zombie(fault, record)
            return
        worker = self.pick(fault, self.cluster.alive())
        record.worker = worker.name
        if kind is FaultKind.TERM:
            await self.terminate(worker, record)
        else:
            await self.cluster.kill(worker)
        if kind in (FaultKind.WIPE, FaultKind.RESTORE_KILL):
            shutil.rmtree(self.cluster.state_dir(worker.slot), ignore_errors=True)
            record.notes.append(f"wiped {self.cluster.state_dir(worker.slot)}")
        if kind is FaultKind.RESTORE_KILL:
            await self._kill_while_restoring(worker, record)
        replacement = self.cluster.spawn(worker.slot, worker.extra)
        await self.recovered(replacement, record)

    async def recovered(self, worker: WorkerProc, record: FaultRecord) -> None:
        """Recovery time of a (re)started worker: spawn until ready, then until the
        whole group settled (every partition owned once, every worker ready)."""
        ready_s = await self.cluster.wait_ready(worker)
        await self.cluster.wait_settled()
        record.recovery_s = round(time.monotonic() - worker.spawned_at, 2)
        record.notes.append(f"{worker.name} ready {ready_s:.1f} s after spawn")

    async def terminate(self, worker: WorkerProc, record: FaultRecord) -> None:
        self.cluster.signal(worker, signal.SIGTERM)
        code = await self.cluster.wait_exit(worker, TERM_TIMEOUT_S)
        if code is None:
            what = f"{worker.name} ignored SIGTERM for {TERM_TIMEOUT_S:.0f} s"
            self.finding(record, what, worker)
            await self.cluster.kill(worker)
        elif code != 0:
            self.finding(record, f"{worker.name} exited {code} after SIGTERM", worker)
        else:
            record.notes.append(f"{worker.name} exited 0 after SIGTERM")

    async def _kill_while_restoring(self, dead: WorkerProc, record: FaultRecord) -> None:
        worker = self.cluster.spawn(dead.slot, dead.extra)
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline and worker.alive():
            status = await self.cluster.status(worker)
            restoring = {
                name: s["restoring"] for name, s in (status or {}).get("stages", {}).items()
            }
            if any(restoring.values()):
                await self.cluster.kill(worker)
                record.notes.append(
                    f"killed {worker.name} while restoring {restoring} "
                    f"({time.monotonic() - worker.spawned_at:.1f} s after spawn)"
                )
                return
            if await self.cluster.is_ready(worker):
                break
            await asyncio.sleep(0.03)
        if not worker.alive():
            raise WorkerDown(f"{worker.name} exited ({worker.process.returncode}) while restoring")
        await self.cluster.kill(worker)
        record.landed = False
        record.notes.append(f"restore of {worker.name} finished unseen; killed it after ready")

    async def _join(self, record: FaultRecord) -> None:
        if len(self.cluster.alive()) >= self.config.max_workers:
            oldest = self.cluster.extras()[0]
            record.notes.append(f"at {self.config.max_workers} workers: {oldest.name} leaves first")
            await self.terminate(oldest, record)
        worker = self.cluster.spawn()
        record.worker = worker.name
        await self.recovered(worker, record)

    async def _leave(self, fault: Fault, record: FaultRecord) -> None:
        if not self.cluster.extras():
            extra = self.cluster.spawn()
            record.notes.append(f"no extra worker: started {extra.name} to leave")
            await self.cluster.wait_ready(extra)
        worker = self.pick(fault, self.cluster.extras())
        record.worker = worker.name
        await self.terminate(worker, record)
        record.recovery_s = round(await self.cluster.wait_settled(), 2)

    async def _zombie(self, fault: Fault, record: FaultRecord) -> None:
        if len([w for w in self.cluster.alive() if not w.stopped]) < 2:
            extra = self.cluster.spawn()
            record.notes.append(f"started {extra.name} to take over from the zombie")
            await self.cluster.wait_ready(extra)
        owners = []
        for worker in self.cluster.alive():
            status = await self.cluster.status(worker)
            if status and any(s["partitions"] for s in status["stages"].values()):
                owners.append(worker)
        zombie = self.pick(fault, owners or self.cluster.alive())
        record.worker = zombie.name
        self.cluster.signal(zombie, signal.SIGSTOP)
        stopped = time.monotonic()
        await asyncio.sleep(fault.pause_s)
        took_over = await self.others_own_everything(zombie, deadline_s=60.0)
        record.notes.append(
            f"SIGSTOP {zombie.name} {time.monotonic() - stopped:.1f} s; "
            + ("others took over its partitions" if took_over else "NO takeover seen")
        )
        if not took_over:
            self.finding(record, f"no worker took over from zombie {zombie.name}", zombie)
        self.cluster.signal(zombie, signal.SIGCONT)
        await asyncio.sleep(1.0)  # let it notice it was fenced before judging the group
        record.recovery_s = round(await self.cluster.wait_settled() + 1.0, 2)

    async def others_own_everything(self, zombie: WorkerProc, deadline_s: float) -> bool:
        deadline = time.monotonic() + deadline_s
        want = set(range(self.config.partitions))
        while time.monotonic() < deadline:
            owned: dict[str, set[int]] = {}
            for worker in self.cluster.alive():
                if worker is zombie:
                    continue
                status = await self.cluster.status(worker)
                for name, stage in (status or {}).get("stages", {}).items():
                    if stage["ready"]:
                        owned.setdefault(name, set()).update(stage["partitions"])
            if len(owned) == len(self.cluster.stages) and all(
                parts == want for parts in owned.values()
            ):
                return True
            await asyncio.sleep(0.2)
        return False

    async def _broker(self, fault: Fault, record: FaultRecord) -> None:
        if self.brokers is not None:
            await self._leader(fault, record, self.brokers)
            return
        pid = localkafka.running_pid()
        if pid is None:
            raise WorkerDown("eddy's local broker is not running: cannot kill it")
        before = await self.groups.positions()
        self.feeder.running.clear()
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        for _ in range(200):  # the pid file names it until it is really gone
            if localkafka.running_pid() != pid:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(fault.pause_s)
        restarted = time.monotonic()
        await self._start_broker()
        record.notes.append(
            f"broker pid {pid} killed, down {fault.pause_s:.1f} s, restarted in "
            f"{time.monotonic() - restarted:.1f} s"
        )
        self.feeder.running.set()
        await self.cluster.wait_settled()
        if not await self.progress_since(before):
            self.finding(record, f"no commit progress {PROGRESS_TIMEOUT_S:.0f} s after broker")
        record.recovery_s = round(time.monotonic() - killed, 2)

    async def _leader(self, fault: Fault, record: FaultRecord, kills: LeaderKills) -> None:
        """On a cluster: kill -9 the broker leading a partition of a topic written in
        transactions, while they are open; the others keep the partition writable
        (replication 3, min.insync.replicas 2). Then start it again."""
        before = await self.groups.positions()
        leaders = await partition_leaders(self.cluster.settings.bootstrap_servers, kills.topic)
        partition = record.index % len(leaders)
        node = leaders[partition]
        killed = time.monotonic()
        await asyncio.to_thread(kills.brokers.kill, node)
        await asyncio.sleep(fault.pause_s)
        await asyncio.to_thread(kills.brokers.start_node, node)
        record.notes.append(
            f"broker {node}, leader of {kills.topic}[{partition}], killed, down "
            f"{fault.pause_s:.1f} s, back after {time.monotonic() - killed:.1f} s"
        )
        await self.cluster.wait_settled()
        if not await self.progress_since(before):
            self.finding(record, f"no commit progress {PROGRESS_TIMEOUT_S:.0f} s after leader kill")
        record.recovery_s = round(time.monotonic() - killed, 2)

    async def _start_broker(self, attempts: int = 3) -> None:
        """Start the broker again; a start that times out (recovery of many partitions
        on a busy machine) is retried before the run is given up."""
        with (self.run_dir / "broker.log").open("a") as out:
            console = Console(file=out, width=120)
            for attempt in range(1, attempts + 1):
                try:
                    await asyncio.to_thread(localkafka.ensure_running, console)
                    return
                except LocalKafkaError as exc:
                    console.print(f"start attempt {attempt} failed: {exc}", markup=False)
                    if attempt == attempts:
                        raise ChaosError(
                            f"the broker did not come back after a broker fault ({attempts} "
                            f"attempts; see {self.run_dir / 'broker.log'})"
                        ) from None

    async def progress_since(self, before: dict[str, tuple[int, int]] | None) -> bool:
        """Every group committed more input than before the fault (or has nothing left)."""
        deadline = time.monotonic() + PROGRESS_TIMEOUT_S
        while time.monotonic() < deadline:
            now = await self.groups.positions()
            if now is not None and before is not None:
                moved = [now[g][0] > before[g][0] or now[g][1] == 0 for g in now]
                if all(moved):
                    return True
            elif now is not None:
                before = now
            await asyncio.sleep(0.5)
        return False

    # -- helpers ---------------------------------------------------------------------------

    def pick(self, fault: Fault, candidates: list[WorkerProc]) -> WorkerProc:
        running = [w for w in candidates if not w.stopped]
        if not running:
            raise WorkerDown(f"no worker to apply {fault.kind.value} to")
        return running[fault.target % len(running)]

    async def _stuck(self, record: FaultRecord, what: str) -> None:
        """A finding with the logs of every worker that is not ready (or gone)."""
        lines: list[str] = []
        paths = []
        for worker in self.cluster.workers.values():
            if worker.alive() and await self.cluster.is_ready(worker):
                continue
            paths.append(str(worker.log_path))
            lines += [f"== {worker.name} (alive: {worker.alive()})", *excerpt(worker.log_path)]
        self.findings.append(Finding(record.index, what, ", ".join(paths) or None, lines))

    def finding(self, record: FaultRecord, what: str, worker: WorkerProc | None = None) -> None:
        log_path = worker.log_path if worker else None
        self.findings.append(
            Finding(
                record.index,
                what,
                str(log_path) if log_path else None,
                excerpt(log_path) if log_path else [],
            )
        )
