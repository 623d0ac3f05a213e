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


def _bounded(kind: type[int] | type[float], low: float, high: float) -> Callable[[str], float]:
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


def _kafka(args: argparse.Namespace) -> int:
    from service.localkafka.cli import run

    return run(args)


def _postgres(args: argparse.Namespace) -> int:
    from service.postgres.cli import run

    return run(args)


def _topics(args: argparse.Namespace) -> int:
    from service.topics import run_cli

    return run_cli(args)


def _worker(args: argparse.Namespace) -> int:
    from service.worker import run_cli

    return run_cli(args)


def _simulate(args: argparse.Namespace) -> int:
    from service.simulator import run_cli

    return run_cli(args)


def _rooms(args: argparse.Namespace) -> int:
    from service.simulator.rooms import Knobs, serve

    knobs = Knobs(int(args.latency_ms), int(args.jitter_ms), args.failure_rate, args.seed)
    serve(args.host, int(args.port), knobs)
    return 0


def _replay(args: argparse.Namespace) -> int:
    from service.replay import run_cli

    return run_cli(args)


def _run(args: argparse.Namespace) -> int:
    from service.launcher import run_cli

    return run_cli(args)


def _status(args: argparse.Namespace) -> int:
    from service.status import run_cli

    return run_cli(args)


def _chaos(args: argparse.Namespace) -> int:
    from service.chaos.cli import run_cli

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

    kafka = commands.add_parser("kafka", help="fetch, start, stop the local Kafka broker")
    kafka.add_argument("action", choices=["fetch", "start", "stop", "status"])
    kafka.set_defaults(handler=_kafka)

    postgres = commands.add_parser(
        "postgres", help="start, stop the local PostgreSQL; migrate the sink's schema"
    )
    postgres.add_argument("action", choices=["start", "stop", "status", "migrate"])
    postgres.set_defaults(handler=_postgres)

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

    simulate = commands.add_parser(
        "simulate",
        help="produce simulated records: sensors (+ thresholds), vehicles, tweets, game",
        description="Send simulated records to Kafka, paced to the wall clock (event time "
        "follows it) unless --fast. Scenarios run concurrently; --count bounds each "
        "scenario's main stream (readings, OBD records, tweets, game events).",
    )
    simulate.add_argument(
        "--scenario",
        default="sensors",
        help="comma-separated: sensors, vehicles, tweets, game, thresholds, or all "
        "(thresholds come with sensors; default: %(default)s)",
    )
    simulate.add_argument(
        "--sensors", type=int, default=10, help="sensors: number of sensors (%(default)s)"
    )
    simulate.add_argument(
        "--rate", type=float, default=100.0, help="sensors: readings/s (%(default)s)"
    )
    simulate.add_argument(
        "--no-thresholds", action="store_true", help="sensors: send no threshold updates"
    )
    simulate.add_argument(
        "--vehicles", type=int, default=5, help="vehicles: how many (%(default)s)"
    )
    simulate.add_argument(
        "--users", type=int, default=50, help="tweets: number of users (%(default)s)"
    )
    simulate.add_argument(
        "--tweet-rate", type=float, default=20.0, help="tweets: tweets per second (%(default)s)"
    )
    simulate.add_argument(
        "--teams", type=int, default=4, help="game: number of teams (%(default)s)"
    )
    simulate.add_argument(
        "--players", type=int, default=5, help="game: players per team (%(default)s)"
    )
    simulate.add_argument(
        "--seed", type=int, default=None, help="makes the run repeatable (random if unset)"
    )
    simulate.add_argument(
        "--count",
        type=int,
        default=None,
        help="stop each scenario after N main-stream records (default: endless)",
    )
    simulate.add_argument("--duration", type=float, default=None, help="stop after N seconds")
    simulate.add_argument(
        "--start-ms", type=int, default=None, help="event time of the start (default: now)"
    )
    simulate.add_argument(
        "--fast", action="store_true", help="send as fast as possible (no real-time pacing)"
    )
    simulate.set_defaults(handler=_simulate)

    rooms = commands.add_parser(
        "rooms",
        help="serve the sensor-to-room lookup that sensor_rooms enriches readings from",
        description="GET /rooms/<sensor_id> -> {sensor_id, room}; 404 for sensors it does "
        "not know (every 13th); GET /stats counts requests and the most in flight.",
    )
    rooms.add_argument("--host", default="127.0.0.1", help="address (%(default)s)")
    rooms.add_argument(
        "--port", type=_bounded(int, 0, 65_535), default=8090, help="port (%(default)s)"
    )
    rooms.add_argument(
        "--latency-ms",
        type=_bounded(int, 0, 600_000),
        default=10,
        help="delay of every answer (%(default)s)",
    )
    rooms.add_argument(
        "--jitter-ms",
        type=_bounded(int, 0, 600_000),
        default=0,
        help="extra random delay, up to (%(default)s)",
    )
    rooms.add_argument(
        "--failure-rate",
        type=_bounded(float, 0, 1),
        default=0.0,
        help="share of 503 answers (%(default)s)",
    )
    rooms.add_argument("--seed", type=int, default=0, help="seeds jitter and failures")
    rooms.set_defaults(handler=_rooms)

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

    run = commands.add_parser("run", help="worker + simulator + live status (make run)")
    run.add_argument("--duration", type=float, default=None, help="stop after N seconds")
    run.add_argument("--rate", type=float, default=100.0, help="simulated readings per second")
    run.set_defaults(handler=_run)

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

    from service.chaos.cli import add_arguments  # argparse only: --help stays fast

    chaos = commands.add_parser("chaos", help="exactly-once chaos runs: faults + verification")
    add_arguments(chaos)
    chaos.set_defaults(handler=_chaos)
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
