"""Hosts of their own on one machine: a network namespace per broker and per worker.

A fleet run gives every broker and every worker its own address, as Kubernetes
gives every pod one, so that the faults a network makes can be made for real:
a link set down stops TCP between two hosts while both processes keep running.

Layout (``N`` picked per run, see :func:`pick_subnet`)::

    bridge <tag>-k  10.231.N.0/24  Kafka traffic   brokers .1-.3, workers .11-.13
    bridge <tag>-p  10.232.N.0/24  worker queries  workers .11-.13 (.21.. after readdress)

The harness (this namespace) has ``.254`` on both bridges, so the feeder and the
verifier reach the brokers and the workers' APIs. A worker has one veth per bridge;
each subnet is on-link through its own veth, so Kafka traffic and queries each take
their own link and either can be cut alone by setting its bridge-side end down.

Every name starts with ``ef<4 hex>`` (the run's tag): two runs on one machine (a
developer's and CI's) never collide, and ``python -m tools fleet clean`` finds
what a crashed run left behind by that prefix.
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from tools.fleet.errors import FleetError

PREFIX = "ef"
NAME = re.compile(rf"^{PREFIX}[0-9a-f]{{4}}-")
KAFKA_NET = 231  # second octet of the Kafka bridge's subnets
PEERS_NET = 232  # and of the peers bridge's
HARNESS_HOST = 254
IP_TIMEOUT_S = 30.0
Link = str  # "kafka" | "peers"
LINKS: tuple[Link, ...] = ("kafka", "peers")


@dataclass
class Host:
    """One namespace: a broker (``b1``) or a worker (``w1``) and its addresses."""

    name: str  # b1, w2
    netns: str  # ef3a1c-b1
    kafka_ip: str
    peers_ip: str | None = None  # workers only
    veths: dict[Link, str] = field(default_factory=dict)  # link -> bridge-side veth

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.netns, *argv]


def require_root() -> None:
    """Raises FleetError saying what is missing when namespaces cannot be made here."""
    missing = [tool for tool in ("ip", "iptables") if shutil.which(tool) is None]
    if missing:
        raise FleetError(
            f"a fleet needs {' and '.join(missing)} (Debian: apt-get install iproute2 "
            "iptables) to give each broker and worker a network namespace"
        )
    if os.geteuid() != 0:
        raise FleetError(
            "a fleet creates network namespaces, veth pairs and bridges: run it as root "
            "(or with CAP_NET_ADMIN and CAP_SYS_ADMIN)"
        )


def run_ip(*argv: str, check: bool = True) -> str:
    """Runs a command (``ip``, ``iptables``); a failure raises FleetError with its stderr."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        raise FleetError(f"{argv[0]} is not installed: a fleet needs iproute2") from None
    if check and done.returncode != 0:
        raise FleetError(f"`{' '.join(argv)}` failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


def used_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks this namespace already has addresses or routes in."""
    nets = []
    for line in run_ip("ip", "-o", "-4", "addr", "show").splitlines():
        match = re.search(r"inet (\S+)", line)
        if match:
            nets.append(ipaddress.IPv4Interface(match.group(1)).network)
    for line in run_ip("ip", "-4", "route", "show", "table", "all").splitlines():
        word = line.split()[0] if line.split() else ""
        with contextlib.suppress(ValueError):
            if "/" in word or re.fullmatch(r"[\d.]+", word):
                nets.append(ipaddress.IPv4Network(word, strict=False))
    return nets


def free_tag() -> str:
    """4 random hex digits no namespace or link on this machine is named after yet
    (closing a run removes everything named after its tag: never another run's)."""
    taken = {name.split("-")[0] for name in (*namespaces(), *links()) if NAME.match(name)}
    while True:
        tag = secrets.token_hex(2)
        if PREFIX + tag not in taken:
            return tag


def pick_subnet(tag: str, used: Sequence[ipaddress.IPv4Network]) -> int:
    """The third octet ``N`` for this run: from the tag, moved on while either
    10.231.N.0/24 or 10.232.N.0/24 overlaps a network already in use."""
    start = int(tag, 16) % 250
    for step in range(250):
        n = (start + step) % 250 + 1
        ours = [ipaddress.IPv4Network(f"10.{net}.{n}.0/24") for net in (KAFKA_NET, PEERS_NET)]
        if not any(mine.overlaps(other) for mine in ours for other in used):
            return n
    raise FleetError(
        "no free 10.231.N.0/24 and 10.232.N.0/24 left: run `python -m tools fleet clean`"
    )


class Network:
    """The namespaces, bridges and veths of one fleet run, and the faults on them.

    Use as a context manager (or call :meth:`close`): everything it made is removed,
    also when the run crashes (an ``atexit`` hook covers an exception that escapes).

    Raises:
        FleetError: not root, no ``ip``, or a command failed (with its message).
    """

    def __init__(self, brokers: int = 3, workers: int = 3, tag: str | None = None) -> None:
        require_root()
        self.tag = PREFIX + (tag or free_tag())
        self.subnet = pick_subnet(self.tag[len(PREFIX) :], used_networks())
        self.bridges: dict[Link, str] = {"kafka": f"{self.tag}-k", "peers": f"{self.tag}-p"}
        self.brokers = [
            Host(f"b{i}", f"{self.tag}-b{i}", self._ip("kafka", i)) for i in range(1, brokers + 1)
        ]
        self.workers = [
            Host(f"w{i}", f"{self.tag}-w{i}", self._ip("kafka", 10 + i), self._ip("peers", 10 + i))
            for i in range(1, workers + 1)
        ]
        self._next_peer_host = 21
        self._closed = False
        atexit.register(self.close)
        owner_file(self.tag).write_text(f"{os.getpid()}\n")
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _ip(self, link: Link, host: int) -> str:
        net = KAFKA_NET if link == "kafka" else PEERS_NET
        return f"10.{net}.{self.subnet}.{host}"

    def host(self, name: str) -> Host:
        for host in (*self.brokers, *self.workers):
            if host.name == name:
                return host
        raise FleetError(f"no host {name!r} in fleet {self.tag}")

    # -- building ------------------------------------------------------------------------

    def _build(self) -> None:
        for link, bridge in self.bridges.items():
            run_ip("ip", "link", "add", bridge, "type", "bridge")
            run_ip("ip", "addr", "add", f"{self._ip(link, HARNESS_HOST)}/24", "dev", bridge)
            run_ip("ip", "link", "set", bridge, "up")
        for host in (*self.brokers, *self.workers):
            run_ip("ip", "netns", "add", host.netns)
            run_ip("ip", "-n", host.netns, "link", "set", "lo", "up")
            self._plug(host, "kafka", host.kafka_ip)
            if host.peers_ip is not None:
                self._plug(host, "peers", host.peers_ip)

    def _plug(self, host: Host, link: Link, address: str) -> None:
        """A veth from ``host``'s namespace (``kafka``/``peers`` inside) to ``link``'s bridge."""
        outside = f"{host.netns}{link[0]}"  # ef3a1c-w1k: 10 chars, under IFNAMSIZ
        run_ip("ip", "link", "add", outside, "type", "veth", "peer", "name", f"{outside}x")
        run_ip("ip", "link", "set", f"{outside}x", "netns", host.netns)
        run_ip("ip", "-n", host.netns, "link", "set", f"{outside}x", "name", link)
        run_ip("ip", "-n", host.netns, "addr", "add", f"{address}/24", "dev", link)
        run_ip("ip", "-n", host.netns, "link", "set", link, "up")
        run_ip("ip", "link", "set", outside, "master", self.bridges[link])
        run_ip("ip", "link", "set", outside, "up")
        host.veths[link] = outside

    # -- faults ----------------------------------------------------------------------------

    def cut(self, worker: str, link: Link) -> None:
        """``worker`` can no longer reach anything over ``link`` (kafka or peers):
        its bridge-side veth goes down; the process keeps running."""
        run_ip("ip", "link", "set", self._veth(worker, link), "down")

    def heal(self, worker: str, link: Link) -> None:
        run_ip("ip", "link", "set", self._veth(worker, link), "up")

    def _veth(self, worker: str, link: Link) -> str:
        if link not in LINKS:
            raise FleetError(f"a link is kafka or peers, not {link!r}")
        return self.host(worker).veths[link]

    def reset_connections(self, worker: str, link: Link) -> None:
        """Resets ``worker``'s open TCP connections over ``link`` (``ss -K``), as a
        middlebox that restarts does: its clients see them closed and reconnect."""
        subnet = f"{self._ip(link, 0)}/24"
        run_ip(*self.host(worker).command(["ss", "-K", "dst", subnet]))

    def isolate_broker(self, broker: str) -> None:
        """``broker`` and the other brokers no longer reach each other (replication and
        the controller quorum stop), while clients still reach it."""
        host = self.host(broker)
        for other in self.brokers:
            if other is not host:
                for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
                    rule = [chain, flag, f"{other.kafka_ip}/32", "-j", "DROP"]
                    run_ip(*host.command(["iptables", "-w", "-A", *rule]))

    def rejoin_broker(self, broker: str) -> None:
        host = self.host(broker)
        run_ip(*host.command(["iptables", "-w", "-F", "INPUT"]))
        run_ip(*host.command(["iptables", "-w", "-F", "OUTPUT"]))

    def readdress(self, worker: str) -> str:
        """A new peers address for ``worker`` (a pod back under a new IP); the old one
        is gone. Returns the new address. Start the worker's next incarnation after."""
        host = self.host(worker)
        if host.peers_ip is None:
            raise FleetError(f"{worker} is not a worker: it has no peers address")
        new = self._ip("peers", self._next_peer_host)
        self._next_peer_host += 1
        run_ip("ip", "-n", host.netns, "addr", "del", f"{host.peers_ip}/24", "dev", "peers")
        run_ip("ip", "-n", host.netns, "addr", "add", f"{new}/24", "dev", "peers")
        host.peers_ip = new
        return new

    # -- clean-up ----------------------------------------------------------------------------

    def close(self) -> None:
        """Removes the namespaces (their veths and rules go with them) and the bridges."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        remove(self.tag)
        owner_file(self.tag).unlink(missing_ok=True)

    def __enter__(self) -> Network:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def remove(prefix: str) -> list[str]:
    """Deletes every namespace and link named ``prefix-...``; what it removed.

    Processes still inside such a namespace (a broker or worker of a run that was
    killed) are SIGKILLed first: without their network they would only linger.
    """
    removed = []
    for netns in namespaces():
        if netns.startswith(f"{prefix}-"):
            for pid in run_ip("ip", "netns", "pids", netns, check=False).split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            run_ip("ip", "netns", "del", netns, check=False)
            removed.append(netns)
    for link in links():
        if link.startswith(f"{prefix}-"):
            run_ip("ip", "link", "del", link, check=False)
            removed.append(link)
    return removed


def namespaces() -> list[str]:
    return [line.split()[0] for line in run_ip("ip", "netns", "list").splitlines() if line.strip()]


def links() -> list[str]:
    names = []
    for line in run_ip("ip", "-o", "link", "show").splitlines():
        match = re.match(r"\d+: ([^:@\s]+)", line)
        if match:
            names.append(match.group(1))
    return names


def owner_file(tag: str) -> Path:
    """Holds the pid of the process that built fleet ``tag``, while it runs."""
    return Path(tempfile.gettempdir()) / f"eddy-fleet-{tag}.pid"


def in_use(tag: str) -> bool:
    """Whether the process that built fleet ``tag`` still runs (its fleet is not stale)."""
    try:
        pid = int(owner_file(tag).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def stale() -> Iterator[str]:
    """Prefixes (``ef3a1c``) of fleets whose namespaces or links exist although the
    process that built them is gone."""
    seen = set()
    for name in (*namespaces(), *links()):
        if NAME.match(name):
            prefix = name.split("-")[0]
            if prefix not in seen:
                seen.add(prefix)
                if not in_use(prefix):
                    yield prefix


def clean() -> list[str]:
    """Removes what fleet runs that are gone left behind (``python -m tools fleet clean``)."""
    require_root()
    removed = []
    for prefix in list(stale()):
        removed += remove(prefix)
        owner_file(prefix).unlink(missing_ok=True)
    return removed
