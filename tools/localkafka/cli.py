"""``python -m tools kafka fetch|start|stop|status|cluster-start|cluster-stop``
(``make kafka-*``)."""

from __future__ import annotations

import argparse

from rich.console import Console

from service.cli_parser import print_json
from service.settings import Settings
from tools import localkafka


def run(args: argparse.Namespace) -> int:
    """Exit codes: 0 done (start/stop are no-ops when nothing is to do); status
    returns 1 when eddy's broker is not running, so scripts can test it."""
    console = Console()
    action: str = args.action
    if action == "fetch":
        lib = localkafka.fetch(console=console)
        console.print(f"Kafka jars: {lib}", markup=False, highlight=False, soft_wrap=True)
    elif action == "start":
        localkafka.ensure_running(console=console)
    elif action == "stop":
        localkafka.stop(console=console)
    elif action == "status":
        return _status(console, as_json=getattr(args, "json", False))
    elif action in ("cluster-start", "cluster-stop"):
        _cluster(console, action, args.brokers)
    else:  # argparse's subcommands make this unreachable from the command line
        raise ValueError(f"unknown kafka action {action!r}")
    return 0


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


def _status(console: Console, *, as_json: bool = False) -> int:
    state = localkafka.status()
    if as_json:
        print_json(
            {
                "running": state.running,
                "ready": state.ready,
                "external": state.external,
                "version": state.version,
                "pid": state.pid,
                "bootstrap": state.bootstrap,
                "data_dir": str(state.data_dir),
                "eddy_bootstrap_servers": _settings().bootstrap_servers,
            }
        )
        return 0 if state.running else 1
    if state.running:
        headline = "running" + ("" if state.ready else " (not answering yet)")
    elif state.external:
        headline = "not running (another Kafka broker, not eddy's, answers on the port)"
    else:
        headline = "not running"
    rows = [
        ("Kafka", headline),
        ("version", state.version),
        ("pid", str(state.pid) if state.pid else "-"),
        ("bootstrap", state.bootstrap),
        ("data dir", str(state.data_dir)),
    ]
    settings = _settings()
    if not settings.uses_local_broker:
        rows.append(
            ("note", f"EDDY_BOOTSTRAP_SERVERS={settings.bootstrap_servers}: eddy uses that")
        )
    for name, value in rows:
        console.print(f"{name:<10} {value}", markup=False, highlight=False, soft_wrap=True)
    return 0 if state.running else 1


def _settings() -> Settings:
    """The settings as the app's workers see them: the environment may hold the
    app's agent settings too, which must not be rejected as misspelt."""
    from service.app.loader import load_app_and_settings

    return load_app_and_settings()[1]
