"""Arguments of ``snapshot``, ``savepoint``, ``stop`` and ``worker --from-savepoint``:
argparse only, so ``eddy --help`` imports no Kafka or Arrow."""

from __future__ import annotations

import argparse
from typing import Any

ABOUT = {
    "snapshot": "A snapshot is a consistent copy of the app's state as Parquet, for batch "
    "analytics (docs/snapshots.md); the newest EDDY_SNAPSHOT_RETAIN are kept.",
    "savepoint": "A savepoint is a consistent copy of all of the app's state and the input "
    "offsets it matches, kept until disposed of (docs/savepoints.md). Resume from one with "
    "`eddy worker --from-savepoint ID` (or `eddy savepoint restore ID` before the workers "
    "start).",
}


def add_arguments(commands: Any) -> None:
    """``snapshot`` and ``savepoint`` with the same verbs, and ``stop``."""
    verbs: dict[str, Any] = {}
    for kind in ("snapshot", "savepoint"):
        parser = commands.add_parser(
            kind, help=f"create, list, show, dispose {kind}s", description=ABOUT[kind]
        )
        actions = verbs[kind] = parser.add_subparsers(
            dest="action", required=True, metavar="action"
        )
        create = actions.add_parser("create", help=f"take a {kind} of the running app")
        create.add_argument("--url", default=None, help="a worker's API (default: EDDY_API_*)")
        _json(create)
        _json(actions.add_parser("list", help=f"the app's complete {kind}s, oldest first"))
        show = actions.add_parser("show", help=f"one {kind}: stages, tables, offsets")
        show.add_argument("id", help=f"{kind} id, or <app>/<id>")
        _json(show)
        dispose = actions.add_parser("dispose", help=f"delete one of the app's {kind}s")
        dispose.add_argument("id", help=f"{kind} id")
        _json(dispose)
    restore_cmd = verbs["savepoint"].add_parser(
        "restore", help="rewrite the app's state and offsets from a savepoint (workers stopped)"
    )
    add_restore_arguments(restore_cmd, "id")

    stop = commands.add_parser(
        "stop", help="stop every worker of the running app, optionally after a savepoint"
    )
    stop.add_argument("--savepoint", action="store_true", help="take a final savepoint first")
    stop.add_argument("--url", default=None, help="a worker's API (default: EDDY_API_*)")


def _json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def add_restore_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument(name, metavar="ID", help="savepoint id, or <app>/<id> of another app")
    parser.add_argument(
        "--allow-non-restored-state",
        action="store_true",
        help="drop saved state that the code no longer declares instead of refusing",
    )
