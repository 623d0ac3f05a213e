"""The link proxy between real namespaces (root; no broker).

Two namespaces joined by a veth pair: an echo server in one, the proxy and the
client in the other, the client unaware of the proxy (a nat rule sends its
connections there). Timings are what a Kafka client would feel through the link.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tools.fleet import net
from tools.fleet.errors import FleetError
from tools.fleet.proxy import Proxy

CLIENT_IP = "10.231.250.1"
SERVER_IP = "10.231.250.2"
SUBNET = "10.231.250.0/30"
ECHO_PORT = 7000
PROXY_PORT = 15000
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def socket_in(netns: str) -> socket.socket:
    """A TCP socket that lives in ``netns``: made by a thread that joined it (a
    socket keeps the namespace it was made in, whichever thread then uses it)."""
    made: list[socket.socket | BaseException] = []

    def make() -> None:
        try:
            fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns({netns}) failed")
            finally:
                os.close(fd)
            made.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        except BaseException as exc:  # handed to the caller's thread
            made.append(exc)

    thread = threading.Thread(target=make)
    thread.start()
    thread.join()
    if isinstance(made[0], BaseException):
        raise made[0]
    return made[0]


@dataclass
class EchoServer:
    """Echoes every byte back; counts the connections it accepted."""

    listener: socket.socket
    accepted: int = 0
    threads: list[threading.Thread] = field(default_factory=list)

    def serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.listener.accept()
                self.accepted += 1
                thread = threading.Thread(target=self._echo, args=(conn,), daemon=True)
                thread.start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            while data := conn.recv(65536):
                conn.sendall(data)


@dataclass
class Pair:
    client_ns: str
    server: EchoServer
    proxy: Proxy

    def connect(self) -> socket.socket:
        """A client connection to the echo server's own address (the proxy is unseen)."""
        sock = socket_in(self.client_ns)
        sock.settimeout(5.0)
        try:
            sock.connect((SERVER_IP, ECHO_PORT))
        except BaseException:
            sock.close()
            raise
        return sock


def _build(tag: str) -> tuple[str, str]:
    client_ns, server_ns = f"{tag}-pc", f"{tag}-ps"
    net.run_ip("ip", "netns", "add", client_ns)
    net.run_ip("ip", "netns", "add", server_ns)
    net.run_ip("ip", "link", "add", client_ns, "type", "veth", "peer", "name", server_ns)
    for ns, address in ((client_ns, CLIENT_IP), (server_ns, SERVER_IP)):
        net.run_ip("ip", "link", "set", ns, "netns", ns)
        net.run_ip("ip", "-n", ns, "addr", "add", f"{address}/30", "dev", ns)
        net.run_ip("ip", "-n", ns, "link", "set", ns, "up")
        net.run_ip("ip", "-n", ns, "link", "set", "lo", "up")
    return client_ns, server_ns


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    """Fails (never skips) when namespaces cannot be made here; removes them even on failure."""
    tag = f"{net.PREFIX}{secrets.token_hex(2)}"  # `python -m tools fleet clean` finds leftovers
    proxy = listener = None
    try:
        try:
            net.require_root()
            client_ns, server_ns = _build(tag)
            listener = socket_in(server_ns)
            listener.bind((SERVER_IP, ECHO_PORT))
            listener.listen()
            proxy = Proxy.start(client_ns, SUBNET, PROXY_PORT, tmp_path / "proxy", seed=7)
        except FleetError as exc:
            pytest.fail(f"cannot build two namespaces and a proxy here: {exc}")
        server = EchoServer(listener)
        threading.Thread(target=server.serve, daemon=True).start()
        yield Pair(client_ns, server, proxy)
    finally:
        if proxy is not None:
            proxy.stop()
        if listener is not None:
            listener.close()
        net.remove(tag)


def round_trip_ms(sock: socket.socket, payload: bytes) -> float:
    started = time.monotonic()
    sock.sendall(payload)
    assert recv_exactly(sock, len(payload)) == payload
    return (time.monotonic() - started) * 1000


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return bytes(data)


def test_latency_delays_both_ways_and_lowering_it_acts_on_the_open_connection(
    pair: Pair,
) -> None:
    pair.proxy.set(latency_ms=200)
    with pair.connect() as conn:
        slow_ms = round_trip_ms(conn, b"ping")
        pair.proxy.set(latency_ms=0)
        fast_ms = round_trip_ms(conn, b"pong")
    assert 400 <= slow_ms < 1000
    assert fast_ms < 50
    assert pair.server.accepted == 1  # the same connection throughout: no reconnect


def test_latency_in_one_direction_only(pair: Pair) -> None:
    pair.proxy.set(latency_ms=300, direction="downstream")
    with pair.connect() as conn:
        assert 300 <= round_trip_ms(conn, b"x") < 550


def test_bandwidth_moves_300_kb_at_100_kb_per_s_in_about_3_s(pair: Pair) -> None:
    pair.proxy.set(bandwidth_bytes_per_s=100_000)
    payload = os.urandom(300_000)
    with pair.connect() as conn:
        sender = threading.Thread(target=conn.sendall, args=(payload,))
        started = time.monotonic()
        sender.start()
        echoed = recv_exactly(conn, len(payload))
        elapsed_s = time.monotonic() - started
        sender.join()
    assert echoed == payload
    assert 2.5 <= elapsed_s <= 4.0, f"300 kB took {elapsed_s:.2f} s"


def test_down_stalls_open_connections_refuses_new_ones_and_loses_nothing(pair: Pair) -> None:
    with pair.connect() as conn:
        assert round_trip_ms(conn, b"before") < 50
        pair.proxy.set(down=True)
        conn.sendall(b"held")
        conn.settimeout(1.0)
        with pytest.raises(TimeoutError):
            conn.recv(4)  # stalled: neither an answer nor a reset
        with pytest.raises(ConnectionRefusedError):
            pair.connect()
        pair.proxy.set(down=False)
        conn.settimeout(5.0)
        assert recv_exactly(conn, 4) == b"held"
    with pair.connect() as again:
        assert round_trip_ms(again, b"after") < 50


def test_drop_1_resets_connections_and_0_lets_them_live(pair: Pair) -> None:
    with pair.connect() as open_before:
        pair.proxy.set(drop=1.0)
        with pair.connect() as new:
            new.sendall(b"x")
            with pytest.raises(ConnectionResetError):
                new.recv(1)
        open_before.sendall(b"x")
        with pytest.raises(ConnectionResetError):
            open_before.recv(1)
    pair.proxy.set(drop=0.0)
    with pair.connect() as conn:
        for _ in range(20):
            assert round_trip_ms(conn, b"alive") < 50


def test_drop_half_breaks_about_half_the_connections(pair: Pair) -> None:
    pair.proxy.set(drop=0.5, direction="upstream")
    reset = 0
    for _ in range(60):
        with pair.connect() as conn:
            conn.sendall(b"x")
            try:
                conn.recv(1)
            except ConnectionResetError:
                reset += 1
    assert 15 <= reset <= 45, f"{reset} of 60 reset"


def test_a_namespace_that_does_not_exist_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FleetError, match="efffff-none") as raised:
        Proxy.start("efffff-none", SUBNET, PROXY_PORT, tmp_path)
    assert "\n" not in str(raised.value)


def test_a_bad_settings_file_keeps_the_last_good_settings_and_says_why(pair: Pair) -> None:
    pair.proxy.set(latency_ms=200)
    pair.proxy.control.path.write_text(
        '{"generation": 9, "upstream": {"drop": 2}, "downstream": {}}'
    )
    reason = "upstream: drop must be a probability from 0.0 to 1.0, got 2"
    deadline = time.monotonic() + 5
    while reason not in pair.proxy.control.ack_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert json.loads(pair.proxy.control.ack_path.read_text()) == {
        "generation": None,
        "error": reason,
    }
    assert reason in (pair.proxy.control.path.parent / "proxy.log").read_text()
    with pair.connect() as conn:
        assert 400 <= round_trip_ms(conn, b"still slow") < 1000
