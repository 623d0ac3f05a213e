"""The network faults of a run on a fleet (``--fleet``): an instance's host cut
from the Kafka bridge past its transaction timeout, and a partition leader cut
from the other brokers, both healed after a while (docs/chaos.md).

The application keeps running through both; what it must do is the verifier's
business: an instance cut for longer than its session and transaction timeouts
has its partitions taken over and its open transactions aborted, and once
healed must find itself fenced rather than commit.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass

from tools.fleet.hosts import Fleet
from tools.localkafka.cluster import leaders as partition_leaders

# The run's timeouts on a fleet: short, so that a cut outlasts both.
SESSION_TIMEOUT_MS = 6_000
TRANSACTION_TIMEOUT_MS = 10_000
CUT_S = (15.0, 20.0)  # an instance cut from the brokers: past both timeouts
ISOLATION_S = (10.0, 15.0)  # a leader cut from the other brokers
LEADERS_TIMEOUT_S = 10.0
ECHO = "echo"  # written in open transactions all the time


@dataclass
class NetworkFault:
    """What a fault did, for the run's summary."""

    what: str
    seconds: float


class FleetFaults:
    """Cuts and isolations on a :class:`Fleet`, their lengths drawn from ``rng``."""

    def __init__(self, fleet: Fleet, bootstrap: str, rng: random.Random) -> None:
        self.fleet = fleet
        self.bootstrap = bootstrap
        self.rng = rng

    async def cut_worker(self, slot: str) -> NetworkFault:
        """``slot``'s host loses the Kafka bridge (its process keeps running, its API
        stays reachable over the peers bridge), then gets it back."""
        host = self.fleet.worker_host(slot).name
        pause_s = self.rng.uniform(*CUT_S)
        cut_at = time.monotonic()
        self.fleet.network.cut(host, "kafka")
        try:
            await asyncio.sleep(pause_s)
        finally:
            self.fleet.network.heal(host, "kafka")
        seconds = time.monotonic() - cut_at
        return NetworkFault(f"{slot} (host {host}) cut from the brokers", seconds)

    async def isolate_leader(self) -> NetworkFault:
        """The broker leading a partition of ``echo`` loses the other brokers (not its
        clients) for 10-15 s: replication and the controller quorum stop, then resume."""
        leaders = await asyncio.wait_for(partition_leaders(self.bootstrap, ECHO), LEADERS_TIMEOUT_S)
        partition = self.rng.choice(sorted(leaders))
        node = leaders[partition]
        pause_s = self.rng.uniform(*ISOLATION_S)
        cut_at = time.monotonic()
        self.fleet.network.isolate_broker(f"b{node}")
        try:
            await asyncio.sleep(pause_s)
        finally:
            self.fleet.network.rejoin_broker(f"b{node}")
        seconds = time.monotonic() - cut_at
        return NetworkFault(
            f"broker {node}, leader of {ECHO}[{partition}], cut from the other brokers", seconds
        )
