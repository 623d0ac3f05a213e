"""Command line: ``python -m service <command>``.

Each command imports its module lazily so ``--help`` stays fast and a command
never pays for another's dependencies (Spark, say).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from service.errors import EddyError

Handler = Callable[[argparse.Namespace], int]


def bounded(kind: type[int] | type[float], low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a number in [low, high], or a one-line usage error."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is not in [{low}, {high}]")
        return value

    return parse


def _topics(args: argparse.Namespace) -> int:
    from service.topics import run_cli

    return run_cli(args)


def _worker(args: argparse.Namespace) -> int:
    from service.worker import run_cli

    return run_cli(args)


def _replay(args: argparse.Namespace) -> int:
    from service.replay import run_cli

    return run_cli(args)


def _status(args: argparse.Namespace) -> int:
    from service.status import run_cli

    return run_cli(args)


def _snapshot(args: argparse.Namespace) -> int:
    from service.snapshot.cli import run_cli

    return run_cli(args)


def _savepoint(args: argparse.Namespace) -> int:
    from service.savepoint.cli import run_savepoint

    return run_savepoint(args)


def _stop(args: argparse.Namespace) -> int:
    from service.savepoint.cli import run_stop

    return run_stop(args)


def _config(args: argparse.Namespace) -> int:
    from service.settings import load_settings, settings_table

    if args.markdown:
        print(settings_table())
        return 0
    for name, value in load_settings().to_env().items():
        print(f"{name}={value}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m service",
        description="Eddy: stateful stream processing with event-time semantics on Kafka. "
        "Settings come from EDDY_* environment variables (see the README).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")

    topics = commands.add_parser("topics", help="create Eddy's topics (idempotent)")
    topics.add_argument("action", choices=["create"])
    topics.set_defaults(handler=_topics)

    worker = commands.add_parser("worker", help="run one worker: agents + REST API")
    worker.add_argument(
        "--from-savepoint",
        default=None,
        metavar="ID",
        help="first restore state and offsets from this savepoint (id, or <app>/<id>); "
        "once: a restarted worker goes on from its own commits",
    )
    worker.add_argument(
        "--allow-non-restored-state",
        action="store_true",
        help="with --from-savepoint: drop saved state the code no longer declares",
    )
    worker.set_defaults(handler=_worker)

    replay = commands.add_parser(
        "replay", help="run a window spec over a JSON Lines file (no Kafka)"
    )
    replay.add_argument("--spec", required=True, help="window spec (JSON, see docs/replay.md)")
    replay.add_argument("--input", required=True, help="JSON Lines: records, watermarks...")
    replay.add_argument("--output", default=None, help="where to write emissions (stdout)")
    replay.set_defaults(handler=_replay)

    config = commands.add_parser("config", help="show the effective settings, or the table")
    config.add_argument("--markdown", action="store_true", help="the README's settings table")
    config.set_defaults(handler=_config)

    status = commands.add_parser(
        "status", help="pipelines, partitions, owners, lag, watermarks, commits (GET /jobs)"
    )
    status.add_argument("--url", default=None, help="a worker's API (default: EDDY_API_*)")
    status.add_argument("--json", action="store_true", help="print the JSON of GET /jobs")
    status.set_defaults(handler=_status)

    snapshot = commands.add_parser(
        "snapshot", help="snapshot the running app's state to Parquet (docs/snapshots.md)"
    )
    snapshot.add_argument("--url", default=None, help="a worker's API (default: EDDY_API_*)")
    snapshot.add_argument("--list", action="store_true", help="list the complete snapshots")
    snapshot.set_defaults(handler=_snapshot)

    from service.savepoint.args import add_arguments as savepoint_arguments

    savepoint_arguments(commands)
    commands.choices["savepoint"].set_defaults(handler=_savepoint)
    commands.choices["stop"].set_defaults(handler=_stop)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    handler: Handler = args.handler
    try:
        return handler(args)
    except EddyError as exc:
        print(f"eddy: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
