"""``python -m tools registry fetch|start|stop|status`` (``make registry-*``)."""

from __future__ import annotations

import argparse

from rich.console import Console

from tools import schemaregistry
from tools.server_cli import Headline, print_status, run_action

HEADLINE = Headline(
    not_ready="not answering yet",
    other="not started here (another registry answers at the URL)",
)


def run(args: argparse.Namespace) -> int:
    """Exit codes: 0 done; status returns 1 when no registry answers."""
    return run_action("registry", args, schemaregistry, _status, {"fetch": _fetch})


def _fetch(console: Console) -> None:
    console.print(str(schemaregistry.fetch()), markup=False, highlight=False, soft_wrap=True)


def _status(console: Console, as_json: bool) -> int:
    state = schemaregistry.status()
    fields: dict[str, object] = {
        "running": state.running,
        "answers": state.answers,
        "pid": state.pid,
        "url": state.url,
        "log": str(state.log),
    }
    rows = [
        ("registry", HEADLINE.of(state.running, state.answers, state.answers)),
        ("pid", str(state.pid) if state.pid else "-"),
        ("url", state.url),
        ("log", str(state.log)),
    ]
    # Up when any registry answers, ours or not (the broker and PostgreSQL: only ours).
    return print_status(
        console, up=state.answers, as_json=as_json, fields=fields, rows=rows, width=9
    )
