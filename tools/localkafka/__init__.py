"""The local Apache Kafka broker that tests, ``make run`` and developers share.

Public API (all synchronous and blocking; from async code call them through
``asyncio.to_thread``, except :func:`wait_until_ready`, which is also safe to call
directly inside a running event loop):

- :func:`fetch` puts the jars of ``KAFKA_VERSION`` (default 3.9.2) under ``$EDDY_HOME/kafka``.
- :func:`ensure_running` starts the broker unless one already answers.
- :func:`stop`, :func:`is_running`, :func:`running_pid`, :func:`status`.
- :func:`reset` stops it and deletes its data (the topics of earlier runs).
- :func:`wait_until_ready` waits for any bootstrap address to answer Kafka requests.
- :func:`tool_command` builds a ``java`` command line for Kafka's tools
  (``org.apache.kafka.tools.ProducerPerformance``...), on the same jars as the broker.

Progress and notes go to a :class:`rich.console.Console` (stderr unless one is
passed), so library callers keep their stdout clean.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from eddy.settings import Settings
from tools.localkafka import broker
from tools.localkafka.config import (
    BOOTSTRAP,
    BROKER_PORT,
    Layout,
    java_command,
    layout,
    render_log_config,
)

# Tests and benchmarks create topics under new names on every run and leave them.
# Past a few thousand partitions the broker slows down: with 15,647 it took 93 s
# to start instead of 4 s, and new topics took long enough to fail runs.
CROWDED_PARTITIONS = 3_000

__all__ = [
    "BrokerStatus",
    "ensure_running",
    "fetch",
    "is_running",
    "reset",
    "running_pid",
    "status",
    "stop",
    "tool_command",
    "wait_until_ready",
]


def _say(console: Console, message: str) -> None:
    # markup=False: paths and Kafka's "[timestamp]" log lines are not rich markup.
    console.print(message, markup=False, highlight=False, soft_wrap=True)


def fetch(version: str | None = None, console: Console | None = None) -> Path:
    """Fetch Kafka's jars from Maven Central once per version (Maven caches in ~/.m2).

    Args:
        version: a Kafka version; default ``KAFKA_VERSION`` or 3.9.2.
        console: where progress goes.

    Returns:
        The ``lib`` folder holding the jars (use ``f"{lib}/*"`` as the classpath).

    Raises:
        LocalKafkaError: bad version, Maven missing or failing.
    """
    console = console or Console(stderr=True)
    lay = layout(version)
    with broker.locked(lay.home):
        if broker.is_fetched(lay):
            return lay.lib
        started = time.monotonic()
        with console.status(f"Fetching Kafka {lay.version} from Maven Central…"):
            lib = broker.fetch_unlocked(lay)
        _say(
            console, f"Fetched Kafka {lay.version} into {lib} in {time.monotonic() - started:.1f} s"
        )
        return lib


def ensure_running(console: Console | None = None) -> bool:
    """Start the local broker unless a broker is already there to use.

    Safe to call from many processes at once: a file lock makes the second caller
    find the first one's broker.

    Returns:
        True only if this call started the broker (so the caller may stop it);
        False if ours was running, another broker answers on port 9092, or
        ``EDDY_BOOTSTRAP_SERVERS`` points at a remote cluster.

    Raises:
        LocalKafkaError: the broker could not be fetched, formatted or started; the
            message quotes the broker's log.
    """
    console = console or Console(stderr=True)
    settings = _settings()
    if not settings.uses_local_broker:
        _say(
            console,
            "Local broker skipped: EDDY_BOOTSTRAP_SERVERS="
            f"{settings.bootstrap_servers} points at an existing cluster",
        )
        return False
    lay = layout()
    with broker.locked(lay.home):
        if (pid := broker.running_pid(lay)) is not None:
            running = broker.read_meta(lay).get("version", "?")
            note = ""
            if running != str(lay.version):
                note = f"; KAFKA_VERSION is {lay.version}: stop it first to switch"
            _say(console, f"Kafka {running} already running on {BOOTSTRAP} (pid {pid}){note}")
            _warn_if_crowded(console, lay)
            return False
        if broker.port_in_use(BROKER_PORT) and broker.run_sync(
            lambda: broker.answers_kafka(BOOTSTRAP)
        ):
            _say(console, f"Using the existing Kafka broker on {BOOTSTRAP} (not started by eddy)")
            return False
        if not broker.is_fetched(lay):
            started = time.monotonic()
            with console.status(f"Fetching Kafka {lay.version} from Maven Central…"):
                broker.fetch_unlocked(lay)
            elapsed = time.monotonic() - started
            _say(console, f"Fetched Kafka {lay.version} into {lay.lib} in {elapsed:.1f} s")
        started = time.monotonic()
        with console.status(f"Starting Kafka {lay.version}…") as spinner:
            pid = broker.start_unlocked(
                lay,
                say=lambda message: _say(console, message),
                on_tick=lambda s: spinner.update(
                    f"Starting Kafka {lay.version} on {BOOTSTRAP}… {s:.0f} s"
                ),
            )
        _say(
            console,
            f"Kafka {lay.version} ready on {BOOTSTRAP} in {time.monotonic() - started:.1f} s "
            f"(pid {pid}; data {lay.data}; logs {lay.logs})",
        )
        _warn_if_crowded(console, lay)
        return True


def partitions_held(lay: Layout) -> int:
    """Topic partitions in the broker's data directory (``<topic>-<n>`` folders;
    Kafka's own metadata log and its internal topics included)."""
    if not lay.data.is_dir():
        return 0
    return sum(
        1
        for entry in lay.data.iterdir()
        if entry.is_dir() and entry.name.rpartition("-")[2].isdigit()
    )


def _warn_if_crowded(console: Console, lay: Layout) -> None:
    held = partitions_held(lay)
    if held > CROWDED_PARTITIONS:
        _say(
            console,
            f"Kafka's data holds {held:,} partitions, mostly topics of earlier test and "
            "bench runs, which slow the broker down. `make kafka-reset` (python -m tools "
            "kafka reset) stops it and deletes its data.",
        )


def reset(console: Console | None = None) -> int:
    """Stop our broker and delete its data: every topic on it. The next start
    formats an empty data directory.

    Returns:
        The number of partitions deleted.
    """
    console = console or Console(stderr=True)
    stop(console)
    lay = layout()
    with broker.locked(lay.home):
        held = partitions_held(lay)
        shutil.rmtree(lay.data, ignore_errors=True)
    _say(console, f"Kafka's data deleted ({held:,} partitions): {lay.data}")
    return held


def stop(console: Console | None = None) -> bool:
    """Stop our broker: SIGTERM (controlled shutdown), SIGKILL after 30 s.

    Returns:
        True if a broker was stopped, False if ours was not running (never an error).
    """
    console = console or Console(stderr=True)
    lay = layout()
    with broker.locked(lay.home), console.status("Stopping Kafka…") as spinner:
        started = time.monotonic()
        pid = broker.stop_unlocked(
            lay,
            on_tick=lambda s: spinner.update(f"Stopping Kafka (controlled shutdown)… {s:.0f} s"),
        )
    if pid is None:
        _say(console, "Kafka is not running")
        return False
    _say(console, f"Kafka stopped (pid {pid}) in {time.monotonic() - started:.1f} s")
    return True


def running_pid() -> int | None:
    """The pid of the broker eddy started, if it is alive."""
    return broker.running_pid(layout())


def is_running() -> bool:
    """Whether eddy's own broker runs (a broker started elsewhere does not count)."""
    return running_pid() is not None


def wait_until_ready(bootstrap: str, timeout_s: float) -> None:
    """Block until ``bootstrap`` answers a Kafka metadata request listing a broker.

    Synchronous; safe inside a running event loop (it probes from a helper thread),
    though it then blocks that loop: prefer ``asyncio.to_thread`` there.

    Raises:
        LocalKafkaError: nothing answered within ``timeout_s``.
    """
    broker.wait_until_ready(bootstrap, timeout_s)


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    ready: bool
    pid: int | None
    version: str
    bootstrap: str
    data_dir: Path
    external: bool  # another broker (not eddy's) answers on port 9092


def status() -> BrokerStatus:
    """What ``python -m tools kafka status`` reports."""
    lay = layout()
    pid = broker.running_pid(lay)
    answers = broker.port_in_use(BROKER_PORT) and broker.run_sync(
        lambda: broker.answers_kafka(BOOTSTRAP, timeout_s=3.0)
    )
    version = broker.read_meta(lay).get("version") if pid else None
    return BrokerStatus(
        running=pid is not None,
        ready=answers,
        pid=pid,
        version=str(version or lay.version),
        bootstrap=BOOTSTRAP,
        data_dir=lay.data,
        external=answers and pid is None,
    )


def tool_command(main_class: str, *args: str, version: str | None = None) -> list[str]:
    """A ``java`` command running one of Kafka's tools, fetching the jars if needed.

    Example: ``tool_command("org.apache.kafka.tools.ProducerPerformance", "--topic", t, ...)``.
    """
    lay = layout(version)
    fetch(version)
    lay.logs.mkdir(parents=True, exist_ok=True)
    lay.log_config.write_text(render_log_config(lay))
    return java_command(lay, main_class, *args)


def _settings() -> Settings:
    """The settings as the app's workers see them: the environment may hold the
    app's agent settings too, which must not be rejected as misspelt."""
    from eddy.app.loader import load_app_and_settings

    return load_app_and_settings()[1]
