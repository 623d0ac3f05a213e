"""What ``python -m tools kafka|postgres|registry`` share: how an action runs and
exits, and how ``status`` answers (the same headline rules, one table or one
JSON object, and an exit code scripts test)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from rich.console import Console

from eddy.cli_parser import print_json


class LocalServer(Protocol):
    """A local server's module: tools.localkafka, tools.postgres, tools.schemaregistry."""

    def ensure_running(self, console: Console | None = None) -> bool: ...

    def stop(self, console: Console | None = None) -> bool: ...


def run_action(
    tool: str,
    args: argparse.Namespace,
    server: LocalServer,
    status: Callable[[Console, bool], int],
    others: Mapping[str, Callable[[Console], object]],
) -> int:
    """``args.action`` of ``server``: ``start``, ``stop``, ``status`` (``--json``) or
    one of its ``others``. ``status`` exits with its own code; any other action
    exits 0 once done (starting what runs or stopping what does not is no error;
    ``ensure_running`` returns whether it started, which is not an exit code)."""
    console = Console()
    action: str = args.action
    if action == "start":
        server.ensure_running(console=console)
    elif action == "stop":
        server.stop(console=console)
    elif action == "status":
        return status(console, getattr(args, "json", False))
    elif action in others:
        others[action](console)
    else:  # argparse's subcommands make this unreachable from the command line
        raise ValueError(f"unknown {tool} action {action!r}")
    return 0


@dataclass(frozen=True)
class Headline:
    """A status table's first row: ``running`` (then ``(<not_ready>)`` while it does
    not answer yet), ``other`` when a server that is not ours answers in its
    place, else ``not running``."""

    not_ready: str
    other: str

    def of(self, running: bool, ready: bool, other_answers: bool) -> str:
        if running:
            return "running" + ("" if ready else f" ({self.not_ready})")
        return self.other if other_answers else "not running"


def print_status(
    console: Console,
    *,
    up: bool,
    as_json: bool,
    fields: dict[str, object],
    rows: Sequence[tuple[str, str]],
    width: int,
) -> int:
    """``fields`` as JSON or ``rows`` as a table (names padded to ``width``); 0 when
    ``up``, else 1, so that scripts can test for it."""
    if as_json:
        print_json(fields)
    else:
        for name, value in rows:
            console.print(f"{name:<{width}} {value}", markup=False, highlight=False, soft_wrap=True)
    return 0 if up else 1
