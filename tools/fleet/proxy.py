"""Slow, lossy or down links for one network namespace: a transparent TCP proxy.

The kernel here has no ``tc netem``, so delay and loss come from this proxy. It
runs inside a worker's namespace (``ip netns exec <ns> python -m
tools.fleet.proxy``); a nat rule there redirects the worker's TCP connections to
one subnet (the Kafka bridge) to the proxy on ``127.0.0.1:<port>``, which reads
each connection's original destination (``SO_ORIGINAL_DST``, IPv4) and connects
there itself. Its own upstream sockets carry a firewall mark (``SO_MARK``) that
the rule excludes, so they are not redirected back to it: ``-m owner`` cannot
tell root from root. The worker sees only the link; it never knows the proxy.

Control: ``<control_dir>/settings.json``, re-read whenever it is replaced or its
mtime changes (polled every 20 ms; :meth:`Proxy.set` writes it atomically)::

    {"generation": 3,
     "upstream":   {"latency_ms": 200, "bandwidth_bytes_per_s": 0, "drop": 0.0, "down": false},
     "downstream": {"latency_ms": 200, "bandwidth_bytes_per_s": 0, "drop": 0.0, "down": false}}

``upstream`` is client to server (worker to broker), ``downstream`` the replies.
Per direction:

- ``latency_ms``: a chunk read at t is written at t + latency, in order. The
  latency in force when it is written counts, so lowering it acts at once, also
  on open connections.
- ``bandwidth_bytes_per_s``: a token bucket shared by the direction's
  connections, with a burst of 100 ms worth (0: unlimited).
- ``drop``: the probability, per chunk read, that the connection is reset (RST
  to both ends) instead of the chunk passing: a lossy link that breaks
  connections, as Kafka clients meet it.
- ``down``: nothing passes (open connections stall, their data is held, not
  lost); while either direction is down the proxy stops listening, so new
  connections are refused.

After applying a file the proxy writes ``{"generation": g, "error": null}`` to
``<control_dir>/applied``, so :meth:`Proxy.set` returns once its change is in
force. A file that does not parse leaves the previous settings in force and its
one-line reason in ``applied`` and on stderr (``<control_dir>/proxy.log``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from tools.fleet.errors import FleetError
from tools.fleet.net import run_ip

DEFAULT_MARK = 0x5ED1
SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h: not in the socket module
POLL_S = 0.02
CHUNK_BYTES = 64 * 1024
QUEUE_CHUNKS = 256  # per direction of a connection: 16 MiB at most held back
BURST_S = 0.1
CONNECT_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
SETTINGS_FILE = "settings.json"
APPLIED_FILE = "applied"
LOG_FILE = "proxy.log"
REPO_ROOT = Path(__file__).resolve().parents[2]
Direction = Literal["both", "upstream", "downstream"]
DESCRIPTION = "A transparent TCP proxy that makes a namespace's links slow, lossy or down."
log = logging.getLogger("eddy.fleet.proxy")


@dataclass(frozen=True)
class LinkSettings:
    """What one direction of the link does to the bytes that cross it."""

    latency_ms: int = 0
    bandwidth_bytes_per_s: int = 0
    drop: float = 0.0
    down: bool = False

    def __post_init__(self) -> None:
        for name in ("latency_ms", "bandwidth_bytes_per_s"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        if type(self.drop) not in (int, float) or not 0.0 <= self.drop <= 1.0:
            raise ValueError(f"drop must be a probability from 0.0 to 1.0, got {self.drop!r}")
        if type(self.down) is not bool:
            raise ValueError(f"down must be true or false, got {self.down!r}")

    @classmethod
    def from_json(cls, raw: object, where: str) -> LinkSettings:
        """Raises ValueError with a one-line reason naming ``where`` (the direction)."""
        if not isinstance(raw, dict):
            raise ValueError(f"{where} must be an object, got {raw!r}")
        unknown = sorted(set(raw) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"{where}: unknown setting {unknown[0]!r}")
        try:
            return cls(**raw)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class ProxySettings:
    """Both directions, and the generation that tells the proxy's acknowledgement apart."""

    generation: int = 0
    upstream: LinkSettings = LinkSettings()
    downstream: LinkSettings = LinkSettings()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ProxySettings:
        """Raises ValueError with a one-line reason."""
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc}") from None
        if not isinstance(raw, dict) or set(raw) != {"generation", "upstream", "downstream"}:
            raise ValueError("expected an object with generation, upstream and downstream")
        if type(raw["generation"]) is not int:
            raise ValueError(f"generation must be an integer, got {raw['generation']!r}")
        return cls(
            raw["generation"],
            LinkSettings.from_json(raw["upstream"], "upstream"),
            LinkSettings.from_json(raw["downstream"], "downstream"),
        )

    @property
    def refusing(self) -> bool:
        return self.upstream.down or self.downstream.down


class TokenBucket:
    """Bandwidth as a rate with a small burst, so 300 kB at 100 kB/s take about 3 s
    evenly rather than passing at once and then pausing. Time is passed in so a
    test can drive it by hand."""

    def __init__(self) -> None:
        self._tokens = 0.0
        self._at_s: float | None = None

    def wait_s(self, size: int, rate: int, now_s: float) -> float:
        """Seconds until ``size`` bytes may pass at ``rate`` bytes/s; 0 means they
        passed (and used their tokens). A rate of 0 is unlimited."""
        if rate <= 0:
            return 0.0
        burst = max(rate * BURST_S, size)  # a piece bigger than the burst still passes
        elapsed_s = burst / rate if self._at_s is None else now_s - self._at_s
        self._tokens = min(burst, self._tokens + elapsed_s * rate)
        self._at_s = now_s
        if self._tokens + 1 > size:  # a byte short is enough: no sub-byte float waits
            self._tokens -= size
            return 0.0
        return (size - self._tokens) / rate


def pieces(chunk: bytes, rate: int) -> Iterator[bytes]:
    """``chunk`` cut into pieces no bigger than the burst, so a slow link spreads it."""
    step = max(1, int(rate * BURST_S)) if rate > 0 else max(1, len(chunk))
    view = memoryview(chunk)
    for start in range(0, len(chunk), step):
        yield bytes(view[start : start + step])


class Link:
    """One direction's settings as they change, and the waits they impose on a chunk."""

    def __init__(self) -> None:
        self.settings = LinkSettings()
        self.bucket = TokenBucket()
        self._changed = asyncio.Event()

    def update(self, settings: LinkSettings) -> None:
        self.settings = settings
        self._changed.set()  # wakes every waiter to look again
        self._changed = asyncio.Event()

    async def admit(self, read_at_s: float, size: int) -> None:
        """Returns when ``size`` bytes read at ``read_at_s`` may be written: the
        link is up, their latency has passed and the bucket has their tokens."""
        loop = asyncio.get_running_loop()
        while True:
            settings = self.settings
            if settings.down:
                await self._changes(None)
                continue
            wait_s = read_at_s + settings.latency_ms / 1000 - loop.time()
            if wait_s <= 0:
                wait_s = self.bucket.wait_s(size, settings.bandwidth_bytes_per_s, loop.time())
                if wait_s <= 0:
                    return
            await self._changes(wait_s)

    async def _changes(self, timeout_s: float | None) -> None:
        """Waits ``timeout_s`` (None: for ever) or until the settings change."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout_s)


class LinkDropped(Exception):
    """The ``drop`` dice said this connection breaks here."""


async def _read_side(
    reader: asyncio.StreamReader,
    queue: asyncio.Queue[tuple[float, bytes] | None],
    link: Link,
    rng: random.Random,
) -> None:
    loop = asyncio.get_running_loop()
    while chunk := await reader.read(CHUNK_BYTES):
        drop = link.settings.drop
        if drop > 0 and rng.random() < drop:
            raise LinkDropped()
        await queue.put((loop.time(), chunk))
    await queue.put(None)


async def _write_side(
    queue: asyncio.Queue[tuple[float, bytes] | None], writer: asyncio.StreamWriter, link: Link
) -> None:
    while (item := await queue.get()) is not None:
        read_at_s, chunk = item
        for piece in pieces(chunk, link.settings.bandwidth_bytes_per_s):
            await link.admit(read_at_s, len(piece))
            writer.write(piece)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()  # half-close, as the sender did


async def _pump(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: Link, rng: random.Random
) -> None:
    """One direction of one connection: reading goes on while writing waits, so
    latency delays the bytes without slowing the sender."""
    queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(QUEUE_CHUNKS)
    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(_read_side(reader, queue, link, rng))
        tasks.create_task(_write_side(queue, writer, link))


def _reset(writer: asyncio.StreamWriter) -> None:
    """Closes with RST (linger 0), as a broken link shows itself to a client."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def original_destination(sock: socket.socket) -> tuple[str, int]:
    """Where the client meant to connect before the nat rule sent it here."""
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    (port,) = struct.unpack_from("!H", raw, 2)
    return socket.inet_ntoa(raw[4:8]), port


async def _connect_marked(
    address: tuple[str, int], mark: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, mark)  # skips the nat rule
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        await asyncio.wait_for(loop.sock_connect(sock, address), CONNECT_TIMEOUT_S)
        return await asyncio.open_connection(sock=sock, limit=CHUNK_BYTES)
    except BaseException:
        sock.close()
        raise


class Relay:
    """Every connection the nat rule sends here, relayed to where it was going."""

    def __init__(self, mark: int, seed: int | None = None) -> None:
        self.upstream = Link()
        self.downstream = Link()
        self.mark = mark
        self.rng = random.Random(seed)

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            address = original_destination(client_w.get_extra_info("socket"))
            server_r, server_w = await _connect_marked(address, self.mark)
        except (OSError, TimeoutError) as exc:
            log.warning("upstream connection failed, resetting the client: %s", exc)
            _reset(client_w)
            return
        broken = False
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(_pump(client_r, server_w, self.upstream, self.rng))
                tasks.create_task(_pump(server_r, client_w, self.downstream, self.rng))
        except* (LinkDropped, OSError):
            broken = True
        for writer in (client_w, server_w):
            if broken:
                _reset(writer)
            else:
                writer.close()


class Listener:
    """The proxy's listening socket, closed while the link is down so that new
    connections are refused (the kernel answers RST) rather than accepted and hung."""

    def __init__(self, port: int, handler: Callable[..., Coroutine[Any, Any, None]]) -> None:
        self.port = port
        self.handler = handler
        self._server: asyncio.Server | None = None

    async def follow(self, refusing: bool) -> None:
        if refusing and self._server is not None:
            self._server.close()  # open connections stay (they stall in their Link)
            self._server = None
        elif not refusing and self._server is None:
            self._server = await asyncio.start_server(
                self.handler, "127.0.0.1", self.port, reuse_address=True, limit=CHUNK_BYTES
            )


class ControlFile:
    """``settings.json`` in, ``applied`` out (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / SETTINGS_FILE
        self.ack_path = directory / APPLIED_FILE
        self._seen: tuple[int, int, int] | None = None

    def poll(self) -> ProxySettings | None:
        """New settings if the file changed since the last poll; ValueError if they do not parse."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return None
        key = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if key == self._seen:
            return None
        self._seen = key
        return ProxySettings.from_json(self.path.read_text())

    def acknowledge(self, generation: int | None, error: str | None = None) -> None:
        _write_atomically(self.ack_path, json.dumps({"generation": generation, "error": error}))


def _write_atomically(path: Path, text: str) -> None:
    """A reader sees the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def serve(port: int, control_dir: Path, mark: int, seed: int | None = None) -> None:
    """Runs the proxy until SIGTERM or SIGINT."""
    relay = Relay(mark, seed)
    listener = Listener(port, relay.handle)
    control = ControlFile(control_dir)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    while not stop.is_set():
        try:
            settings = control.poll()
        except (ValueError, OSError) as exc:
            log.error("ignoring %s: %s", control.path, exc)
            control.acknowledge(None, str(exc))
            settings = None
        if settings is not None:
            relay.upstream.update(settings.upstream)
            relay.downstream.update(settings.downstream)
            await listener.follow(settings.refusing)
            control.acknowledge(settings.generation)
            log.info("settings %s: %s", settings.generation, settings.to_json())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), POLL_S)
    await listener.follow(refusing=True)


class Proxy:
    """The harness's handle on a proxy in one namespace: start, set, stop.

    Raises:
        FleetError: the rule or the process could not be set up, or a change was
            not applied in time; the message says which, with the proxy's own reason.
    """

    def __init__(self, netns: str, subnet: str, port: int, control_dir: Path, mark: int) -> None:
        self.netns = netns
        self.subnet = subnet
        self.port = port
        self.control = ControlFile(control_dir)
        self.mark = mark
        self.settings = ProxySettings()
        self.process: subprocess.Popen[bytes] | None = None
        self._rule_installed = False

    @classmethod
    def start(
        cls,
        netns: str,
        subnet: str,
        port: int,
        control_dir: Path,
        *,
        mark: int = DEFAULT_MARK,
        seed: int | None = None,
    ) -> Proxy:
        """Starts the proxy in ``netns``; its TCP connections to ``subnet`` then pass through it."""
        try:
            subnet = str(ipaddress.IPv4Network(subnet, strict=False))
        except ValueError as exc:
            raise FleetError(f"proxy subnet {subnet!r} is not an IPv4 network: {exc}") from None
        if not 0 < port < 65536:
            raise FleetError(f"proxy port must be 1..65535, got {port}")
        control_dir.mkdir(parents=True, exist_ok=True)
        proxy = cls(netns, subnet, port, control_dir, mark)
        try:
            proxy._launch(seed)
            run_ip(
                "ip", "netns", "exec", netns, "iptables", "-w", "-t", "nat", "-A", *proxy._rule()
            )
            proxy._rule_installed = True
        except BaseException:
            proxy.stop()
            raise
        return proxy

    def _rule(self) -> list[str]:
        return [
            "OUTPUT", "-p", "tcp", "-d", self.subnet, "-m", "mark", "!", "--mark", hex(self.mark),
            "-j", "REDIRECT", "--to-ports", str(self.port),
        ]  # fmt: skip

    def _launch(self, seed: int | None) -> None:
        _write_atomically(self.control.path, self.settings.to_json())
        self.control.ack_path.unlink(missing_ok=True)
        run_ip("ip", "-n", self.netns, "link", "set", "lo", "up")  # REDIRECT lands on 127.0.0.1
        argv = [
            "ip", "netns", "exec", self.netns, sys.executable, "-m", "tools.fleet.proxy",
            "--port", str(self.port), "--control-dir", str(self.control.path.parent),
            "--mark", str(self.mark),
        ]  # fmt: skip
        if seed is not None:
            argv += ["--seed", str(seed)]
        with (self.control.path.parent / LOG_FILE).open("ab") as log_file:
            self.process = subprocess.Popen(
                argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file
            )
        self._wait_applied(0, timeout_s=15.0)

    def set(
        self,
        *,
        latency_ms: int | None = None,
        bandwidth_bytes_per_s: int | None = None,
        drop: float | None = None,
        down: bool | None = None,
        direction: Direction = "both",
    ) -> None:
        """Changes the given settings of ``direction``; returns once they are in force.

        Raises:
            ValueError: a value out of range (one line naming it).
            FleetError: the proxy did not apply it within 5 s.
        """
        given = {
            "latency_ms": latency_ms,
            "bandwidth_bytes_per_s": bandwidth_bytes_per_s,
            "drop": drop,
            "down": down,
        }
        if direction not in ("both", "upstream", "downstream"):
            raise ValueError(f"direction must be both, upstream or downstream, got {direction!r}")
        changes: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        old = self.settings
        new = ProxySettings(
            old.generation + 1,
            replace(old.upstream, **changes) if direction != "downstream" else old.upstream,
            replace(old.downstream, **changes) if direction != "upstream" else old.downstream,
        )
        _write_atomically(self.control.path, new.to_json())
        self.settings = new
        self._wait_applied(new.generation, timeout_s=5.0)

    def _wait_applied(self, generation: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        error = None
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                ack = json.loads(self.control.ack_path.read_text())
                if ack.get("generation") == generation:
                    return
                error = ack.get("error")
            if self.process is not None and self.process.poll() is not None:
                raise FleetError(f"the proxy in {self.netns} exited: {self._log_tail()}")
            time.sleep(POLL_S / 2)
        reason = error or self._log_tail() or "no reason logged"
        raise FleetError(
            f"the proxy in {self.netns} did not apply settings {generation} "
            f"within {timeout_s:.0f} s: {reason}"
        )

    def _log_tail(self) -> str:
        path = self.control.path.parent / LOG_FILE
        lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
        return lines[-1] if lines else ""

    def stop(self) -> None:
        """Removes the rule, then stops the process; safe to call twice."""
        if self._rule_installed:
            self._rule_installed = False
            run_ip("ip", "netns", "exec", self.netns, "iptables", "-w", "-t", "nat", "-D",
                   *self._rule(), check=False)  # fmt: skip
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> Proxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.fleet.proxy", description=DESCRIPTION)
    parser.add_argument("--port", type=int, required=True, help="listen on 127.0.0.1:PORT")
    parser.add_argument("--control-dir", type=Path, required=True, help="holds settings.json")
    parser.add_argument(
        "--mark", type=int, default=DEFAULT_MARK, help="SO_MARK of upstream sockets"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the drop dice")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s proxy: %(message)s")
    try:
        asyncio.run(serve(args.port, args.control_dir, args.mark, args.seed))
    except OSError as exc:
        sys.exit(f"proxy: {exc}")


if __name__ == "__main__":
    main()
