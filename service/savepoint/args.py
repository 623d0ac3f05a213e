"""Arguments of ``savepoint``, ``stop`` and ``worker --from-savepoint``: argparse
only, so ``python -m service --help`` imports no Kafka or Arrow."""

from __future__ import annotations

import argparse
from typing import Any


def add_arguments(commands: Any) -> None:
    """The ``savepoint`` and ``stop`` subcommands (argparse only: --help stays fast)."""
    savepoint = commands.add_parser(
        "savepoint",
        help="create, list, show, dispose, restore savepoints (docs/savepoints.md)",
        description="A savepoint is a consistent copy of all of the app's state and the "
        "input offsets it matches, kept until disposed of. Resume from one with "
        "`worker --from-savepoint ID` (or `savepoint restore ID` before the workers start).",
    )
    actions = savepoint.add_subparsers(dest="action", required=True, metavar="action")
    create = actions.add_parser("create", help="take a savepoint of the running app")
    create.add_argument("--url", default=None, help="a worker's API (default: EDDY_API_*)")
    listing = actions.add_parser("list", help="the app's complete savepoints")
    listing.add_argument("--json", action="store_true", help="print JSON")
    show = actions.add_parser("show", help="one savepoint: pipelines, tables, offsets")
    show.add_argument("id", help="savepoint id, or <app>/<id>")
    show.add_argument("--json", action="store_true", help="print JSON")
    dispose = actions.add_parser("dispose", help="delete one of the app's savepoints")
    dispose.add_argument("id", help="savepoint id")
    restore_cmd = actions.add_parser(
        "restore",
        help="rewrite the app's state and offsets from a savepoint (workers stopped)",
    )
    add_restore_arguments(restore_cmd, "id")

    stop = commands.add_parser(
        "stop", help="stop every worker of the running app, optionally after a savepoint"
    )
    stop.add_argument("--savepoint", action="store_true", help="take a final savepoint first")
    stop.add_argument("--url", default=None, help="a worker's API (default: EDDY_API_*)")


def add_restore_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument(name, metavar="ID", help="savepoint id, or <app>/<id> of another app")
    parser.add_argument(
        "--allow-non-restored-state",
        action="store_true",
        help="drop saved state that the code no longer declares instead of refusing",
    )
