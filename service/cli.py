"""Command line: ``python -m eddy <command>``.

Each command imports its module lazily so ``--help`` stays fast and a command
never pays for another's dependencies (Spark, say).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

from eddy import logs
from eddy.cli_parser import OneLineParser, print_error
from eddy.errors import EddyError

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
    from eddy.topics import run_cli

    return run_cli(args)


def _worker(args: argparse.Namespace) -> int:
    from eddy.plane.front import run_cli

    return run_cli(args)


def _replay(args: argparse.Namespace) -> int:
    from eddy.replay import run_cli

    return run_cli(args)


def _status(args: argparse.Namespace) -> int:
    from eddy.status import run_cli

    return run_cli(args)


def _snapshot(args: argparse.Namespace) -> int:
    from eddy.snapshot.cli import run_cli

    return run_cli(args)


def _savepoint(args: argparse.Namespace) -> int:
    from eddy.savepoint.cli import run_savepoint

    return run_savepoint(args)


def _stop(args: argparse.Namespace) -> int:
    from eddy.savepoint.cli import run_stop

    return run_stop(args)


def _agents(args: argparse.Namespace) -> int:
    from eddy.agents_cli import run_cli

    return run_cli(args)


def _send(args: argparse.Namespace) -> int:
    from eddy.send import run_cli

    return run_cli(args)


def _consume(args: argparse.Namespace) -> int:
    from eddy.consume import run_cli

    return run_cli(args)


def _config(args: argparse.Namespace) -> int:
    from eddy.config_cli import run_cli

    return run_cli(args)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("eddy")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="eddy",
        description="Eddy: stateful stream processing with event-time semantics on Kafka. "
        "Every command works on an app (--app module:attribute, or EDDY_APP); settings come "
        "from EDDY_* environment variables (eddy config lists them).",
    )
    parser.add_argument("--version", action="version", version=f"eddy {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")

    agents = commands.add_parser(
        "agents", help="the app's agents: on by default or not, settings, stages, REST paths"
    )
    agents.add_argument("--json", action="store_true", help="print JSON")
    agents.set_defaults(handler=_agents)

    send = commands.add_parser(
        "send", help="write one record (JSON) to a topic of the app, keyed as the topic says"
    )
    send.add_argument("topic", help="the topic's name in the app (EDDY_TOPIC_PREFIX is added)")
    send.add_argument("value", help="the record, as JSON text; checked against the topic's type")
    send.add_argument("--key", default=None, help="the record's key (default: the topic's key)")
    send.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a header of the record (UTF-8 text); repeat for several",
    )
    send.set_defaults(handler=_send)
    _add_consume(commands)

    topics = commands.add_parser("topics", help="the app's topics: create or list them")
    topic_actions = topics.add_subparsers(dest="action", required=True, metavar="action")
    topic_actions.add_parser(
        "create", help="create every topic the app uses, checking existing ones (idempotent)"
    )
    listing = topic_actions.add_parser(
        "list", help="every topic the app uses, what for, and its partitions (no Kafka needed)"
    )
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.add_argument(
        "--markdown", action="store_true", help="the topics table of docs/configuration.md"
    )
    topics.set_defaults(handler=_topics)

    worker = commands.add_parser(
        "worker",
        help="run a worker: ingest processes for the agents, one query process for the REST API",
    )
    worker.add_argument(
        "--processes",
        type=bounded(int, 1, 256),
        default=None,
        metavar="N",
        help="ingest processes to start (default: EDDY_WORKER_PROCESSES, else one per core)",
    )
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
        "replay",
        help="run agents of an app, or a window spec, over a JSON Lines file (no Kafka)",
    )
    replay.add_argument("--agent", default=None, help="agents to run, comma-separated")
    replay.add_argument("--spec", default=None, help="window spec (JSON, see docs/replay.md)")
    replay.add_argument("--input", required=True, help="JSON Lines: records, watermarks...")
    replay.add_argument(
        "--output",
        default=None,
        help="where to write emissions (stdout); written whole on success, else left as it was",
    )
    replay.add_argument(
        "--max-line-bytes",
        type=bounded(int, 1, 2**30),
        default=None,
        metavar="N",
        help="refuse an input line longer than N bytes (default: 8388608, 8 MiB)",
    )
    replay.add_argument(
        "--keep-open",
        action="store_true",
        help="leave windows open at the end of the input (default: the watermark goes to "
        "+infinity, so every window fires and every event-time timer)",
    )
    replay.set_defaults(handler=_replay)

    config = commands.add_parser(
        "config", help="the effective settings (the framework's and the agents'), or their table"
    )
    config_form = config.add_mutually_exclusive_group()
    config_form.add_argument(
        "--markdown", action="store_true", help="the settings table of docs/configuration.md"
    )
    config_form.add_argument(
        "--json", action="store_true", help="print JSON: each variable, its value, who reads it"
    )
    config.set_defaults(handler=_config)

    status = commands.add_parser(
        "status", help="stages, partitions, owners, lag, watermarks, commits (GET /jobs)"
    )
    status.add_argument("--url", default=None, help="a worker's API (default: EDDY_API_*)")
    status.add_argument("--json", action="store_true", help="print the JSON of GET /jobs")
    status.set_defaults(handler=_status)

    from eddy.savepoint.args import add_arguments as savepoint_arguments

    savepoint_arguments(commands)
    commands.choices["snapshot"].set_defaults(handler=_snapshot)
    commands.choices["savepoint"].set_defaults(handler=_savepoint)
    commands.choices["stop"].set_defaults(handler=_stop)
    _add_app_option(parser)
    return parser


def _add_consume(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    consume = commands.add_parser(
        "consume",
        help="read a topic of the app, each record decoded by the topic's serdes "
        "(read_committed: aborted records never show)",
    )
    consume.add_argument(
        "topic",
        help="the topic's name in the app (EDDY_TOPIC_PREFIX is added); a topic the app does "
        "not declare (dead letters, say) is named in full and read raw",
    )
    start = consume.add_mutually_exclusive_group()
    start.add_argument(
        "--from-beginning",
        dest="from_end",
        action="store_false",
        help="read from the oldest record of every partition (the default)",
    )
    start.add_argument(
        "--from-end", action="store_true", help="read only records written from now on"
    )
    stop = consume.add_mutually_exclusive_group()
    stop.add_argument(
        "--count",
        type=bounded(int, 1, 2**31),
        default=None,
        metavar="N",
        help="stop after N records",
    )
    stop.add_argument(
        "--follow", action="store_true", help="keep reading until Ctrl-C (which exits 0)"
    )
    consume.add_argument(
        "--timeout-ms",
        type=bounded(int, 1, 2**31),
        default=None,
        metavar="MS",
        help="stop once no record has arrived for MS milliseconds (default: 5000 without "
        "--follow or --count, else none)",
    )
    consume.add_argument(
        "--json",
        action="store_true",
        help="one JSON document a line: partition, offset, timestamp_ms, key, value, headers "
        '(bytes that are not UTF-8 as {"base64": ...}), and error for a record not decoded',
    )
    # Both flags share one destination: its default is the first action's, so say it.
    consume.set_defaults(handler=_consume, from_end=False)


def _add_app_option(parser: argparse.ArgumentParser, *, top: bool = True) -> None:
    """Every command works on an app: ``--app module:attribute`` (the way
    ``uvicorn module:app`` names one), defaulting to EDDY_APP. It is taken before
    the command (``eddy --app m:a topics list``, as ``faust -A``) or after it."""
    parser.add_argument(
        "--app",
        # Only the top level sets the default: a command's own --app must not
        # undo one given before the command.
        default=None if top else argparse.SUPPRESS,
        metavar="MODULE:APP",
        help="the app, e.g. clicks:app (default: EDDY_APP, else eddy.examples:app)",
    )
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for action in subparsers:
        for child in action.choices.values():
            _add_app_option(child, top=False)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure()
    if args.command != "worker":
        # aiokafka logs every failed connection attempt; a command's own error says it once.
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    handler: Handler = args.handler
    try:
        return handler(args)
    except EddyError as exc:
        return print_error("eddy", exc)
    except BrokenPipeError:
        # The reader went away (`eddy topics list | head`): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as exc:  # a path or host refused (permissions, disk, DNS): its message names it
        return print_error("eddy", exc)
    except KeyboardInterrupt:
        return 130
