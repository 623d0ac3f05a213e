"""``python -m tools registry fetch|start|stop|status`` (``make registry-*``)."""

from __future__ import annotations

import argparse

from rich.console import Console

from service.cli_parser import print_json
from tools import schemaregistry


def run(args: argparse.Namespace) -> int:
    """Exit codes: 0 done; status returns 1 when no registry answers."""
    console = Console()
    action: str = args.action
    if action == "fetch":
        console.print(str(schemaregistry.fetch()), markup=False, highlight=False, soft_wrap=True)
    elif action == "start":
        schemaregistry.ensure_running(console=console)
    elif action == "stop":
        schemaregistry.stop(console=console)
    elif action == "status":
        return _status(console, as_json=getattr(args, "json", False))
    else:  # argparse's subcommands make this unreachable from the command line
        raise ValueError(f"unknown registry action {action!r}")
    return 0


def _status(console: Console, *, as_json: bool) -> int:
    state = schemaregistry.status()
    if as_json:
        print_json(
            {
                "running": state.running,
                "answers": state.answers,
                "pid": state.pid,
                "url": state.url,
                "log": str(state.log),
            }
        )
        return 0 if state.answers else 1
    if state.running:
        headline = "running" + ("" if state.answers else " (not answering yet)")
    elif state.answers:
        headline = "not started here (another registry answers at the URL)"
    else:
        headline = "not running"
    rows = [
        ("registry", headline),
        ("pid", str(state.pid) if state.pid else "-"),
        ("url", state.url),
        ("log", str(state.log)),
    ]
    for name, value in rows:
        console.print(f"{name:<9} {value}", markup=False, highlight=False, soft_wrap=True)
    return 0 if state.answers else 1
