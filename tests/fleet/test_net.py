"""The fleet's network alone: real namespaces, bridges and veths (root; no broker).

Connectivity is checked with TCP between processes in different namespaces, as
Kafka and the workers' queries use it: a cut link must stop a connection that
worked, and healing must bring it back.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tools.fleet import net
from tools.fleet.errors import FleetError
from tools.fleet.net import Host, Network

PORT = 7000
# Listens once on argv[1]:PORT, answers "ok" to every connection, until killed.
SERVER = f"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], {PORT})); s.listen(); print("listening", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"ok"); c.close()
"""
CLIENT = f"""
import socket, sys
try:
    with socket.create_connection((sys.argv[1], {PORT}), timeout=1.5) as c:
        print(c.recv(2).decode())
except OSError as exc:
    print(type(exc).__name__)
"""


def connect(src: Host | None, address: str) -> str:
    """``ok`` if a TCP connection from ``src``'s namespace (None: the harness's) got
    the server's answer, else the error's name (TimeoutError, ConnectionRefusedError)."""
    argv = [sys.executable, "-c", CLIENT, address]
    command = argv if src is None else src.command(argv)
    return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip()


def connect_after_heal(src: Host | None, address: str, within_s: float = 10.0) -> str:
    """As :func:`connect`, retried for ``within_s``: after a link comes back up the
    kernel's neighbour entry for the address may still say unreachable for a while."""
    deadline = time.monotonic() + within_s
    while (result := connect(src, address)) != "ok" and time.monotonic() < deadline:
        time.sleep(0.5)
    return result


class Servers:
    def __init__(self) -> None:
        self.children: list[subprocess.Popen[str]] = []

    def start(self, host: Host, address: str) -> None:
        child = subprocess.Popen(
            host.command([sys.executable, "-c", SERVER, address]),
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "listening"
        self.children.append(child)

    def stop(self) -> None:
        for child in self.children:
            child.kill()
            child.wait()


@pytest.fixture
def fleet() -> Iterator[tuple[Network, Servers]]:
    servers = Servers()
    with Network(brokers=3, workers=3) as network:
        try:
            yield network, servers
        finally:
            servers.stop()


def test_each_host_has_its_namespace_and_address(fleet: tuple[Network, Servers]) -> None:
    network, servers = fleet
    names = net.namespaces()
    hosts = [*network.brokers, *network.workers]
    assert all(h.netns in names for h in hosts)
    assert len({h.kafka_ip for h in hosts}) == 6
    for broker in network.brokers:
        servers.start(broker, broker.kafka_ip)
    for worker in network.workers:
        assert worker.peers_ip is not None
        servers.start(worker, worker.peers_ip)
    # The harness reaches every broker and every worker's API; workers reach brokers.
    assert [connect(None, b.kafka_ip) for b in network.brokers] == ["ok"] * 3
    assert [connect(None, w.peers_ip or "") for w in network.workers] == ["ok"] * 3
    assert connect(network.host("w1"), network.host("b3").kafka_ip) == "ok"


def test_a_cut_link_stops_tcp_and_healing_restores_it(fleet: tuple[Network, Servers]) -> None:
    network, servers = fleet
    w1, w2, b1 = network.host("w1"), network.host("w2"), network.host("b1")
    assert w2.peers_ip is not None
    servers.start(w2, w2.peers_ip)
    servers.start(b1, b1.kafka_ip)
    assert connect(w1, w2.peers_ip) == "ok"

    network.cut("w1", "peers")
    # Queries between workers stop; the same worker still reaches the brokers.
    assert connect(w1, w2.peers_ip) == "TimeoutError"
    assert connect(w1, b1.kafka_ip) == "ok"
    network.heal("w1", "peers")
    assert connect_after_heal(w1, w2.peers_ip) == "ok"

    network.cut("w1", "kafka")
    assert connect(w1, b1.kafka_ip) == "TimeoutError"
    assert connect(w1, w2.peers_ip) == "ok"
    network.heal("w1", "kafka")
    assert connect_after_heal(w1, b1.kafka_ip) == "ok"


def test_an_isolated_broker_loses_its_peers_but_not_its_clients(
    fleet: tuple[Network, Servers],
) -> None:
    network, servers = fleet
    b1, b2, w1 = network.host("b1"), network.host("b2"), network.host("w1")
    servers.start(b1, b1.kafka_ip)
    servers.start(b2, b2.kafka_ip)

    network.isolate_broker("b1")
    assert connect(b2, b1.kafka_ip) == "TimeoutError"
    assert connect(b1, b2.kafka_ip) == "TimeoutError"
    assert connect(w1, b1.kafka_ip) == "ok"
    assert connect(None, b1.kafka_ip) == "ok"
    network.rejoin_broker("b1")
    assert connect_after_heal(b2, b1.kafka_ip) == "ok"
    assert connect_after_heal(b1, b2.kafka_ip) == "ok"


def test_readdress_moves_a_worker_to_a_new_address(fleet: tuple[Network, Servers]) -> None:
    network, servers = fleet
    w1 = network.host("w1")
    old = w1.peers_ip
    new = network.readdress("w1")
    assert new != old
    assert w1.peers_ip == new
    servers.start(w1, new)
    assert connect(network.host("w2"), new) == "ok"
    assert connect(None, old or "") != "ok"


def test_close_leaves_nothing_behind() -> None:
    network = Network(brokers=3, workers=3)
    network.isolate_broker("b1")
    network.close()
    left = [n for n in (*net.namespaces(), *net.links()) if n.startswith(network.tag)]
    assert left == []
    assert network.tag not in list(net.stale())


def test_clean_removes_what_a_crashed_run_left() -> None:
    network = Network(brokers=1, workers=1)
    # As if the harness was killed before close(): its owner is a process that is gone.
    gone = subprocess.Popen(["true"])
    gone.wait()
    net.owner_file(network.tag).write_text(f"{gone.pid}\n")
    network._closed = True
    assert network.tag in list(net.stale())
    removed = net.clean()
    assert f"{network.tag}-b1" in removed
    assert f"{network.tag}-k" in removed
    assert network.tag not in list(net.stale())


def test_two_runs_get_their_own_names_and_subnets() -> None:
    with Network(brokers=1, workers=1) as one, Network(brokers=1, workers=1) as two:
        assert one.tag != two.tag
        assert one.subnet != two.subnet


def test_without_root_the_error_says_what_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(FleetError, match="run it as root"):
        Network(brokers=1, workers=1)
