"""A fleet: three brokers and three workers, each on a host of its own.

:class:`Fleet` owns the :class:`~tools.fleet.net.Network` and the
:class:`~tools.localkafka.cluster.Brokers` started inside it, and tells the chaos
harness's :class:`~tools.chaos.cluster.Cluster` where each worker slot runs
(:meth:`Fleet.place`). Closing it stops the brokers, deletes their data and
removes the network, in that order (a broker left in a deleted namespace would
keep its files open and its JVM running).
"""

from __future__ import annotations

import contextlib
import shutil
from types import TracebackType

from eddy.paths import eddy_home
from tools.fleet import net
from tools.fleet.errors import FleetError
from tools.fleet.net import KAFKA_NET, Host, Network
from tools.fleet.proxy import Proxy
from tools.localkafka.cluster import Brokers
from tools.localkafka.config import KafkaVersion, configured_version

BROKERS = 3
WORKERS = 3
PROXY_PORT = 19_999  # inside each worker's namespace: no port of this machine


class Fleet:
    """Hosts for ``brokers`` brokers and ``workers`` workers; :meth:`start` starts the
    brokers (replication ``brokers``, ``min.insync.replicas`` 2)."""

    def __init__(
        self,
        brokers: int = BROKERS,
        workers: int = WORKERS,
        version: KafkaVersion | None = None,
    ) -> None:
        self.network = Network(brokers, workers)
        try:
            self.brokers = Brokers(
                version or configured_version(),
                brokers,
                hosts=[b.kafka_ip for b in self.network.brokers],
                netns=[b.netns for b in self.network.brokers],
                name=f"fleet/{self.network.tag}",
            )
        except BaseException:
            self.network.close()
            raise
        self.proxies: dict[str, Proxy] = {}  # worker host -> the proxy slowing its link

    @property
    def tag(self) -> str:
        return self.network.tag

    @property
    def bootstrap(self) -> str:
        return self.brokers.bootstrap

    def start(self) -> str:
        """Starts every broker in its namespace; the bootstrap servers once all answer."""
        return self.brokers.start()

    def slow(self, slot: str, latency_ms: int) -> None:
        """``slot``'s worker reaches the brokers ``latency_ms`` later each way: a proxy
        in its namespace takes its new connections, and its open ones are reset (the
        proxy only sees new ones) so that its client reconnects through the proxy.
        Only while slowed: relaying every byte all run long would cost CPU the other
        faults' recovery needs on a small machine."""
        host = self.worker_host(slot)
        proxy = self.proxies.get(host.name)
        if proxy is None:
            subnet = f"10.{KAFKA_NET}.{self.network.subnet}.0/24"
            folder = self.brokers.home / "proxies" / host.name
            proxy = Proxy.start(host.netns, subnet, PROXY_PORT, folder)
            self.proxies[host.name] = proxy
            self.network.reset_connections(host.name, "kafka")
        proxy.set(latency_ms=latency_ms)

    def unslow(self, slot: str) -> None:
        """Back to the direct link: the proxy goes, and the connections it held with it."""
        proxy = self.proxies.pop(self.worker_host(slot).name, None)
        if proxy is not None:
            proxy.stop()

    def worker_host(self, slot: str) -> Host:
        """Slot ``w0`` runs on host ``w1``, ``w1`` on ``w2``...: one host per base slot.

        Raises:
            FleetError: the slot has no host (an extra worker: a fleet has none spare).
        """
        index = int(slot[1:]) + 1 if slot[:1] == "w" and slot[1:].isdigit() else 0
        if not 1 <= index <= len(self.network.workers):
            raise FleetError(f"worker slot {slot!r} has no host in fleet {self.tag}")
        return self.network.workers[index - 1]

    def place(self, slot: str) -> tuple[str, str]:
        """The namespace and API address of ``slot``'s worker (its address now)."""
        host = self.worker_host(slot)
        assert host.peers_ip is not None  # workers always have one
        return host.netns, host.peers_ip

    def close(self, keep_data: bool = False) -> None:
        """Stops the brokers, deletes their folder (unless ``keep_data``: a failed run's
        evidence, their logs and partitions), removes the network."""
        try:
            for proxy in self.proxies.values():
                with contextlib.suppress(Exception):
                    proxy.stop()
            for node in self.brokers.ids:  # its data goes too: no controlled shutdown
                with contextlib.suppress(Exception):
                    self.brokers.kill(node)
            if not keep_data:
                shutil.rmtree(self.brokers.home, ignore_errors=True)
        finally:
            self.network.close()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def clean() -> list[str]:
    """What fleet runs that are gone left behind: their processes, namespaces, bridges
    and brokers' folders (``python -m tools fleet clean``). Names of what it removed."""
    stale = list(net.stale())
    removed = net.clean()
    for tag in stale:
        folder = eddy_home() / "kafka-cluster" / "fleet" / tag
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    return removed
