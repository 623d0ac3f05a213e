"""The network faults of a fleet run, injected between the hosts' namespaces.

Each fault picks its victim as the process faults do (``Fault.target`` among the
running workers, or the broker leading a partition of the run's echo topic), makes
the fault, waits ``Fault.pause_s``, heals it, then measures convergence: from the
heal until the group settled (every partition owned once, every worker ready)
and every consumer group committed input again. That time is the record's
``recovery_s``. What the runtime does wrong (no takeover from a worker cut past
its transaction timeout, no progress after healing) becomes a finding.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from tools.chaos.cluster import WorkerProc
from tools.chaos.schedule import Fault, FaultKind
from tools.fleet.hosts import Fleet
from tools.localkafka.cluster import leaders as partition_leaders

if TYPE_CHECKING:
    from tools.chaos.faults import FaultRecord, Injector

SLOW_LATENCIES_MS = (200, 2_000)
TAKEOVER_TIMEOUT_S = 60.0


class NetworkFaults:
    """Injects :data:`tools.chaos.schedule.NETWORK_KINDS` into a :class:`Fleet`."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.network = fleet.network

    async def inject(self, injector: Injector, fault: Fault, record: FaultRecord) -> None:
        kind = fault.kind
        if kind is FaultKind.ISOLATE_LEADER:
            await self._isolate_leader(injector, fault, record)
            return
        worker = injector.pick(fault, injector.cluster.alive())
        record.worker = worker.name
        if kind is FaultKind.READDRESS:
            await self._readdress(injector, worker, record)
        elif kind is FaultKind.SLOW:
            await self._slow(injector, fault, worker, record)
        else:
            await self._cut(injector, fault, worker, record)

    async def _cut(
        self, injector: Injector, fault: Fault, worker: WorkerProc, record: FaultRecord
    ) -> None:
        link = "peers" if fault.kind is FaultKind.CUT_PEERS else "kafka"
        host = self.fleet.worker_host(worker.slot).name
        before = await injector.groups.positions()
        self.network.cut(host, link)
        cut_at = time.monotonic()
        try:
            if fault.kind is FaultKind.CUT_LONG:
                # Past the session timeout the group gives its partitions to the others;
                # the link stays cut until they did (on a loaded machine a rebalance of
                # every stage takes a while), then for the rest of the pause.
                took_over = await injector.others_own_everything(
                    worker, fault.pause_s + TAKEOVER_TIMEOUT_S
                )
                record.notes.append(
                    f"others took over {worker.name}'s partitions after "
                    f"{time.monotonic() - cut_at:.1f} s"
                    if took_over
                    else f"NO takeover from {worker.name} within "
                    f"{fault.pause_s + TAKEOVER_TIMEOUT_S:.1f} s"
                )
                if not took_over:
                    injector.finding(
                        record, f"no worker took over from cut-off {worker.name}", worker
                    )
            await asyncio.sleep(max(0.0, fault.pause_s - (time.monotonic() - cut_at)))
        finally:
            cut_s = time.monotonic() - cut_at
            self.network.heal(host, link)
        record.notes.append(f"{worker.name} cut from the {link} for {cut_s:.1f} s")
        await self._converged(injector, record, before, time.monotonic())

    async def _isolate_leader(self, injector: Injector, fault: Fault, record: FaultRecord) -> None:
        """The broker leading a partition of the echo topic (written in transactions by
        every task) loses the other brokers while clients still reach it."""
        if injector.brokers is None:
            raise AssertionError("a fleet run always has its brokers")
        topic = injector.brokers.topic
        bootstrap = injector.cluster.settings.bootstrap_servers
        before = await injector.groups.positions()
        leaders = await partition_leaders(bootstrap, topic)
        partition = record.index % len(leaders)
        node = leaders[partition]
        self.network.isolate_broker(f"b{node}")
        try:
            await asyncio.sleep(fault.pause_s)
            with_leaders = await asyncio.wait_for(partition_leaders(bootstrap, topic), 10.0)
            record.notes.append(
                f"broker {node}, leader of {topic}[{partition}], cut from the other brokers "
                f"{fault.pause_s:.1f} s; leader then: {with_leaders.get(partition)}"
            )
        except (TimeoutError, OSError) as exc:
            record.notes.append(f"leaders not known during the isolation ({exc!r})")
        finally:
            self.network.rejoin_broker(f"b{node}")
        await self._converged(injector, record, before, time.monotonic())

    async def _slow(
        self, injector: Injector, fault: Fault, worker: WorkerProc, record: FaultRecord
    ) -> None:
        """The worker's link to the brokers gets 200 ms or 2 s of latency each way (the
        seed's choice), through a proxy in its namespace; then the direct link again."""
        latency_ms = SLOW_LATENCIES_MS[fault.target % len(SLOW_LATENCIES_MS)]
        before = await injector.groups.positions()
        try:
            await asyncio.to_thread(self.fleet.slow, worker.slot, latency_ms)
            await asyncio.sleep(fault.pause_s)
        finally:
            await asyncio.to_thread(self.fleet.unslow, worker.slot)
        record.notes.append(
            f"{worker.name}'s link to the brokers {latency_ms} ms slower each way for "
            f"{fault.pause_s:.1f} s"
        )
        await self._converged(injector, record, before, time.monotonic())

    async def _readdress(self, injector: Injector, worker: WorkerProc, record: FaultRecord) -> None:
        """A pod deleted and rescheduled: SIGTERM, a new address, the same slot (state
        directory) started again; the other workers must forward its keys there."""
        await injector.terminate(worker, record)
        host = self.fleet.worker_host(worker.slot)
        old = host.peers_ip
        new = self.network.readdress(host.name)
        record.notes.append(f"{worker.slot} moved from {old} to {new}")
        replacement = injector.cluster.spawn(worker.slot, worker.extra)
        await injector.recovered(replacement, record)

    async def _converged(
        self,
        injector: Injector,
        record: FaultRecord,
        before: dict[str, tuple[int, int]] | None,
        healed: float,
    ) -> None:
        await injector.cluster.wait_settled()
        if not await injector.progress_since(before):
            injector.finding(record, f"no commit progress after {record.kind} healed")
        record.recovery_s = round(time.monotonic() - healed, 2)
