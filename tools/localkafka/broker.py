"""A real Apache Kafka broker on 127.0.0.1:9092, run from Maven Central's jars.

There is no Docker and no Apache download site on Eddy's machines, but Maven
Central serves the broker itself (``org.apache.kafka:kafka_2.13``) and Java 17 runs it.
One combined broker + controller (KRaft) lives under ``$EDDY_HOME/kafka``: jars per
version, one data directory, one pid file. Every step is idempotent, because
``make test``, test fixtures and ``make run`` all call it and may race.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from eddy.errors import LocalKafkaError
from tools.localkafka.config import (
    BOOTSTRAP,
    BROKER_JVM,
    BROKER_PORT,
    CONTROLLER_PORT,
    COPY_DEPENDENCIES,
    HOST,
    KafkaVersion,
    Layout,
    java_command,
    layout,
    needs_wipe,
    record_running,
    render_log_config,
    render_pom,
    render_server_properties,
    running_home,
)

T = TypeVar("T")
# A restart after kill -9 recovers every partition's log first: minutes on a
# loaded 2-core machine with hundreds of partitions. Give up only after that.
READY_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 30.0
_MAIN_CLASS = "kafka.Kafka"
_COMPLETE = ".complete"

# Brokers started by this process: their Popen must reap them, or a stopped broker
# would linger as a zombie that still looks alive to os.kill(pid, 0).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@contextlib.contextmanager
def locked(home: Path, timeout_s: float = 600.0) -> Iterator[None]:
    """Serialises fetch/start/stop across processes (pytest workers, make, run)."""
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".lock").open("w") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LocalKafkaError(
                        f"another eddy process has held {home / '.lock'} for {timeout_s:.0f} s; "
                        "stop it or delete the file"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Maven's generic advice after every failure; the useful line is the one before it.
_MVN_BOILERPLATE = re.compile(
    r"^\[ERROR\] *(To see the full|Re-run Maven|For more information|\[Help|$)"
)


def _tail(text: str, lines: int = 20) -> str:
    all_lines = _ANSI.sub("", text).strip().splitlines()
    kept = [line for line in all_lines if not _MVN_BOILERPLATE.match(line)]
    return "\n".join(kept[-lines:]) or "(no output)"


def fetch_unlocked(lay: Layout) -> Path:
    """Writes lib next to its final place and renames it, so an interrupted fetch
    never leaves a half lib that a later start would trust."""
    if is_fetched(lay):
        return lay.lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalKafkaError("mvn is not on PATH: install Maven to fetch Kafka's jars")
    lay.version_dir.mkdir(parents=True, exist_ok=True)
    (lay.version_dir / "pom.xml").write_text(render_pom(lay.version))
    for leftover in lay.version_dir.glob("lib.tmp-*"):  # from fetches killed midway
        shutil.rmtree(leftover, ignore_errors=True)
    staging = lay.version_dir / f"lib.tmp-{os.getpid()}"
    command = [mvn, "-B", "-q", "-U", "-Dstyle.color=never", COPY_DEPENDENCIES]
    command += [f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
    result = subprocess.run(
        command, cwd=lay.version_dir, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = _tail(result.stdout + result.stderr)
        raise LocalKafkaError(
            f"mvn could not fetch Kafka {lay.version} from Maven Central (exit "
            f"{result.returncode}; pom in {lay.version_dir}). Check the version exists and "
            f"Maven Central is reachable. mvn said:\n{tail}"
        )
    clients = sorted(p.name for p in staging.glob("kafka-clients-*.jar"))
    if clients != [f"kafka-clients-{lay.version}.jar"]:
        shutil.rmtree(staging, ignore_errors=True)
        raise LocalKafkaError(f"expected only kafka-clients-{lay.version}.jar, got {clients}")
    (staging / _COMPLETE).write_text(f"{lay.version}\n")
    shutil.rmtree(lay.lib, ignore_errors=True)  # a lib without .complete is left-over junk
    staging.rename(lay.lib)
    return lay.lib


def is_fetched(lay: Layout) -> bool:
    return (lay.lib / _COMPLETE).exists()


def read_meta(lay: Layout) -> dict[str, Any]:
    try:
        meta = json.loads(lay.meta_file.read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _write_meta(lay: Layout, **changes: Any) -> None:
    meta = read_meta(lay) | changes
    scratch = lay.meta_file.with_suffix(".tmp")
    scratch.write_text(json.dumps(meta, indent=2) + "\n")
    scratch.replace(lay.meta_file)


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        result = subprocess.run(
            ["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, check=False
        )
        return result.stdout.split()


def _alive(pid: int) -> bool:
    if (child := _CHILDREN.get(pid)) is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):  # a zombie is dead
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def running_pid(lay: Layout | None = None) -> int | None:
    """Our broker's pid: the pid file alone could name a recycled pid or another broker."""
    lay = lay or layout()
    try:
        pid = int(lay.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    command = _cmdline(pid)
    ours = _MAIN_CLASS in command and str(lay.server_properties) in command
    return pid if ours and _alive(pid) else None


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((HOST, port)) == 0


def run_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Runs in a thread of its own: the caller may sit inside a running event loop
    (async tests), and asyncio.run would also reset the caller's current loop."""
    with ThreadPoolExecutor(1, thread_name_prefix="localkafka-probe") as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


async def answers_kafka(bootstrap: str, timeout_s: float = 5.0) -> bool:
    """True once the broker serves metadata with itself in it, not merely an open port."""
    from aiokafka.admin import AIOKafkaAdminClient  # keeps `kafka --help` fast

    quiet = logging.getLogger("aiokafka")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # a not-yet-ready broker is expected, not an error
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="eddy-localkafka-probe",
        request_timeout_ms=int(timeout_s * 1000),
    )
    try:
        async with asyncio.timeout(timeout_s):
            await admin.start()
            cluster = await admin.describe_cluster()
        return bool(cluster.get("brokers"))
    except Exception:
        return False
    finally:
        with contextlib.suppress(Exception):
            await admin.close()
        quiet.setLevel(level)


def wait_until_ready(
    bootstrap: str,
    timeout_s: float,
    *,
    alive: Callable[[], bool] | None = None,
    on_tick: Callable[[float], None] | None = None,
) -> None:
    """Blocks (sync; safe inside an event loop) until ``bootstrap`` answers Kafka requests.

    Args:
        bootstrap: host:port of one broker.
        timeout_s: give up after this long.
        alive: checked between attempts; False means the broker died, so stop waiting.
        on_tick: called with the elapsed seconds, for progress output.

    Raises:
        LocalKafkaError: the broker died or did not answer in time.
    """
    host, _, port = bootstrap.rpartition(":")
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < timeout_s:
        if on_tick:
            on_tick(elapsed)
        if alive is not None and not alive():
            raise LocalKafkaError(f"the broker exited after {elapsed:.1f} s")
        with socket.socket() as sock:
            sock.settimeout(1.0)
            port_open = sock.connect_ex((host, int(port))) == 0
        if port_open and run_sync(lambda: answers_kafka(bootstrap)):
            return
        time.sleep(0.5)
    raise LocalKafkaError(f"no Kafka broker answered at {bootstrap} within {timeout_s:.0f} s")


def _data_cluster_id(lay: Layout) -> str | None:
    with contextlib.suppress(OSError):
        for line in (lay.data / "meta.properties").read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.partition("=")[2].strip()
    return None


def _java_tool(lay: Layout, *args: str) -> str:
    command = java_command(lay, "kafka.tools.StorageTool", *args)
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        raise LocalKafkaError(
            f"kafka.tools.StorageTool {args[0]} failed (exit {result.returncode}); see "
            f"{lay.logs / 'tools.log'}. It said:\n{_tail(result.stdout + result.stderr)}"
        )
    return result.stdout


def prepare_storage(lay: Layout, say: Callable[[str], None]) -> str:
    """Keeps the data between starts; returns the cluster id the data belongs to."""
    meta = read_meta(lay)
    previous = None
    with contextlib.suppress(KeyError, LocalKafkaError):  # no or garbled meta.json
        previous = KafkaVersion.parse(str(meta["version"]))
    if lay.data.exists() and needs_wipe(previous, lay.version):
        say(f"Wiping {lay.data}: written by Kafka {previous}, which Kafka {lay.version} can't read")
        shutil.rmtree(lay.data)
    cluster_id = _data_cluster_id(lay) or meta.get("cluster_id")
    if not cluster_id:
        cluster_id = _java_tool(lay, "random-uuid").strip().splitlines()[-1].strip()
    if _data_cluster_id(lay) is None:
        say(f"Formatting {lay.data} (cluster id {cluster_id})")
        lay.data.mkdir(parents=True, exist_ok=True)
        _java_tool(
            lay, "format", "-t", cluster_id, "-c", str(lay.server_properties), "--ignore-formatted"
        )
    _write_meta(lay, version=str(lay.version), cluster_id=cluster_id)
    return str(cluster_id)


def terminate(pid: int, timeout_s: float) -> None:
    """Stop broker ``pid`` (SIGTERM, then SIGKILL after ``timeout_s``)."""
    _terminate(pid, timeout_s)


def _terminate(pid: int, timeout_s: float, on_tick: Callable[[float], None] | None = None) -> None:
    """SIGTERM first: Kafka's controlled shutdown flushes logs so the next start is quick."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    started = time.monotonic()
    while _alive(pid) and (elapsed := time.monotonic() - started) < timeout_s:
        if on_tick:
            on_tick(elapsed)
        time.sleep(0.2)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    _CHILDREN.pop(pid, None)


def spawn(lay: Layout) -> int:
    """Starts the broker in its own session, so Ctrl-C in a terminal doesn't kill it."""
    command = java_command(
        lay, _MAIN_CLASS, str(lay.server_properties), jvm=BROKER_JVM, log_name="server.log"
    )
    lay.logs.mkdir(parents=True, exist_ok=True)
    with lay.stdout_log.open("wb") as out:  # this run's output only: it is what we quote
        child = subprocess.Popen(
            command,
            cwd=lay.home,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _CHILDREN[child.pid] = child
    lay.pid_file.write_text(f"{child.pid}\n")
    record_running(lay.home)
    _write_meta(lay, pid=child.pid, started_at=datetime.now(UTC).isoformat(timespec="seconds"))
    return child.pid


def start_unlocked(
    lay: Layout, say: Callable[[str], None], on_tick: Callable[[float], None] | None = None
) -> int:
    """Returns the new broker's pid once it answers, or raises with its log's tail."""
    for port in (BROKER_PORT, CONTROLLER_PORT):
        if port_in_use(port):
            raise LocalKafkaError(
                f"port {port} on {HOST} is taken by a process that is not a Kafka broker "
                f"(find it with `ss -ltnp | grep {port}`); stop it, or point "
                "EDDY_BOOTSTRAP_SERVERS at another cluster"
            )
    fetch_unlocked(lay)
    lay.logs.mkdir(parents=True, exist_ok=True)
    lay.log_config.write_text(render_log_config(lay))
    lay.server_properties.write_text(render_server_properties(lay))
    prepare_storage(lay, say)
    pid = spawn(lay)
    try:
        wait_until_ready(BOOTSTRAP, READY_TIMEOUT_S, alive=lambda: _alive(pid), on_tick=on_tick)
    except LocalKafkaError as exc:
        _terminate(pid, 5.0)
        lay.pid_file.unlink(missing_ok=True)
        output = lay.stdout_log.read_text(errors="replace")
        raise LocalKafkaError(
            f"Kafka {lay.version} did not start: {exc}. Its output is in {lay.stdout_log} "
            f"(full log: {lay.logs / 'server.log'}); last lines:\n{_tail(output)}"
        ) from None
    return pid


def stop_unlocked(lay: Layout, on_tick: Callable[[float], None] | None = None) -> int | None:
    """Returns the stopped pid, or None when nothing of ours was running."""
    pid = running_pid(lay)
    ours = running_home() == lay.home  # before the pid file goes: it makes the record
    if pid is not None:
        _terminate(pid, STOP_TIMEOUT_S, on_tick)
    lay.pid_file.unlink(missing_ok=True)
    if ours:
        record_running(None)
    if lay.meta_file.exists():
        _write_meta(lay, pid=None)
    return pid
