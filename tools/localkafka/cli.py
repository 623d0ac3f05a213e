"""``python -m tools kafka fetch|start|stop|reset|status|cluster-start|cluster-stop``
(``make kafka-*``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rich.console import Console

from eddy.settings import Settings
from tools import localkafka
from tools.server_cli import Headline, print_status, run_action

HEADLINE = Headline(
    not_ready="not answering yet",
    other="not running (another Kafka broker, not eddy's, answers on the port)",
)


def run(args: argparse.Namespace) -> int:
    """Exit codes: 0 done (start/stop are no-ops when nothing is to do); status
    returns 1 when eddy's broker is not running, so scripts can test it."""
    others: dict[str, Callable[[Console], object]] = {
        "fetch": _fetch,
        "reset": localkafka.reset,
        # Lambdas: only these two actions have --brokers, read when one runs.
        "cluster-start": lambda console: _cluster(console, "cluster-start", args.brokers),
        "cluster-stop": lambda console: _cluster(console, "cluster-stop", args.brokers),
    }
    return run_action("kafka", args, localkafka, _status, others)


def _fetch(console: Console) -> None:
    lib = localkafka.fetch(console=console)
    console.print(f"Kafka jars: {lib}", markup=False, highlight=False, soft_wrap=True)


def _cluster(console: Console, action: str, nodes: int) -> None:
    from tools.localkafka.cluster import Brokers
    from tools.localkafka.config import configured_version

    brokers = Brokers(configured_version(), nodes)
    if action == "cluster-stop":
        brokers.wipe()
        console.print(f"cluster in {brokers.home} stopped, data deleted", markup=False)
        return
    bootstrap = brokers.start()
    console.print(
        f"Kafka {brokers.version} x{nodes}: EDDY_BOOTSTRAP_SERVERS={bootstrap}", markup=False
    )


def _status(console: Console, as_json: bool) -> int:
    state = localkafka.status()
    settings = _settings()
    fields: dict[str, object] = {
        "running": state.running,
        "ready": state.ready,
        "external": state.external,
        "version": state.version,
        "pid": state.pid,
        "bootstrap": state.bootstrap,
        "data_dir": str(state.data_dir),
        "eddy_bootstrap_servers": settings.bootstrap_servers,
    }
    rows = [
        ("Kafka", HEADLINE.of(state.running, state.ready, state.external)),
        ("version", state.version),
        ("pid", str(state.pid) if state.pid else "-"),
        ("bootstrap", state.bootstrap),
        ("data dir", str(state.data_dir)),
    ]
    if not settings.uses_local_broker:
        rows.append(
            ("note", f"EDDY_BOOTSTRAP_SERVERS={settings.bootstrap_servers}: eddy uses that")
        )
    return print_status(
        console, up=state.running, as_json=as_json, fields=fields, rows=rows, width=10
    )


def _settings() -> Settings:
    """The settings as the app's workers see them: the environment may hold the
    app's agent settings too, which must not be rejected as misspelt."""
    from eddy.app.loader import load_app_and_settings

    return load_app_and_settings()[1]
