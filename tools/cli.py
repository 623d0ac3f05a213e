"""Developer tools: ``python -m tools <command>``.

The local broker, PostgreSQL, S3 server and Spark cluster, the simulator and the
room service, ``make run``'s launcher and the exactly-once chaos harness. None of
it runs in production and nothing under ``service/``, ``agents/``, ``tables/`` or
``api/`` imports it; the wheel and the image leave this folder out.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence

from eddy import logs
from eddy.cli import bounded
from eddy.cli_parser import OneLineParser, print_error
from eddy.errors import EddyError


class ToolsParser(OneLineParser):
    """Usage errors in one line, named ``tools:`` (the tools are not Eddy's CLI)."""

    error_name = "tools"


def _kafka(args: argparse.Namespace) -> int:
    from tools.localkafka.cli import run

    return run(args)


def _postgres(args: argparse.Namespace) -> int:
    from tools.postgres.cli import run

    return run(args)


def _registry(args: argparse.Namespace) -> int:
    from tools.schemaregistry.cli import run

    return run(args)


def _s3(args: argparse.Namespace) -> int:
    from tools.s3.cli import run

    return run(args)


def _spark(args: argparse.Namespace) -> int:
    from tools.spark.cli import run

    return run(args)


def _simulate(args: argparse.Namespace) -> int:
    from tools.simulator import run_cli

    return run_cli(args)


def _rooms(args: argparse.Namespace) -> int:
    from tools.simulator.rooms import Knobs, serve

    knobs = Knobs(int(args.latency_ms), int(args.jitter_ms), args.failure_rate, args.seed)
    serve(args.host, int(args.port), knobs)
    return 0


def _run(args: argparse.Namespace) -> int:
    from tools.launcher import run_cli

    return run_cli(args)


def _chaos(args: argparse.Namespace) -> int:
    from tools.chaos.cli import run_cli

    return run_cli(args)


def _fleet(args: argparse.Namespace) -> int:
    from tools.fleet.cli import run_cli

    return run_cli(args)


def _eos_kafka(args: argparse.Namespace) -> int:
    from tools.kafkaeos.cli import run_cli

    return run_cli(args)


def _docs(args: argparse.Namespace) -> int:
    from tools.docs import main as write_docs

    return write_docs(check=args.check)


def build_parser() -> argparse.ArgumentParser:
    parser = ToolsParser(
        prog="python -m tools",
        description="Eddy's developer tools: local servers, the simulator, make run, chaos, docs.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")

    kafka = _actions(
        commands,
        "kafka",
        "fetch, start, stop the local Kafka broker",
        _kafka,
        {
            "fetch": "download the Kafka jars (once per version) into $EDDY_HOME/kafka",
            "start": "start the local broker, unless one already answers",
            "cluster-start": "start a KRaft cluster of --brokers brokers (KAFKA_VERSION) on "
            ":19092..",
            "cluster-stop": "stop that cluster and delete its data",
            "stop": "stop eddy's local broker (nothing to do if it is not running)",
            "reset": "stop eddy's local broker and delete its data: every topic on it",
            "status": "is the local broker running: pid, version, address (exit 1 if not)",
        },
    )
    for cluster in (kafka["cluster-start"], kafka["cluster-stop"]):
        cluster.add_argument(
            "--brokers", type=int, default=3,
            help="brokers (replication factor; min.insync.replicas 2 from 2 brokers on)",
        )  # fmt: skip

    _actions(
        commands,
        "postgres",
        "start, stop the local PostgreSQL; migrate the sink's schema",
        _postgres,
        {
            "start": "start the local PostgreSQL (initdb on first use), unless one answers",
            "stop": "stop eddy's local PostgreSQL (nothing to do if it is not running)",
            "status": "is the local PostgreSQL running: pid, DSN, data dir (exit 1 if not)",
            "migrate": "apply the PostgreSQL sink's schema migrations (EDDY_POSTGRES_DSN)",
        },
    )

    _actions(
        commands,
        "registry",
        "build, start, stop a local schema registry (Apicurio, Confluent's API)",
        _registry,
        {
            "fetch": "build Apicurio Registry from Maven Central (once) into $EDDY_HOME",
            "start": "start the local registry on 127.0.0.1:8081, unless one answers",
            "stop": "stop the local registry (its schemas are in memory: they go too)",
            "status": "does a registry answer at 127.0.0.1:8081: pid, URL (exit 1 if not)",
        },
    )

    s3 = _actions(
        commands,
        "s3",
        "start, stop a local S3-compatible server (moto) for snapshots",
        _s3,
        {
            "start": "start the local S3 server with a bucket; prints the AWS_* to export",
            "stop": "stop the local S3 server (its objects are in memory: they go too)",
            "status": "is the local S3 server running: pid, endpoint (exit 1 if not)",
        },
    )
    s3["start"].add_argument(
        "--port", type=bounded(int, 0, 65_535), default=0, help="port (default: a free one)"
    )
    s3["start"].add_argument("--bucket", default="eddy", help="bucket to create (%(default)s)")

    _actions(
        commands,
        "spark",
        "fetch hadoop-aws, package the jobs, run a local standalone cluster",
        _spark,
        {
            "fetch": "download hadoop-aws for pyspark's Hadoop (once) into $EDDY_HOME/spark; "
            "prints the jars for --jars",
            "package": "zip the parts of eddy the jobs use, for spark-submit --py-files",
            "start": "start a standalone master and one worker on free ports",
            "stop": "stop the standalone master and worker",
            "status": "is the standalone cluster running: master URL, pids (exit 1 if not)",
        },
    )

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
        "--port", type=bounded(int, 0, 65_535), default=8090, help="port (%(default)s)"
    )
    rooms.add_argument(
        "--latency-ms",
        type=bounded(int, 0, 600_000),
        default=10,
        help="delay of every answer (%(default)s)",
    )
    rooms.add_argument(
        "--jitter-ms",
        type=bounded(int, 0, 600_000),
        default=0,
        help="extra random delay, up to (%(default)s)",
    )
    rooms.add_argument(
        "--failure-rate",
        type=bounded(float, 0, 1),
        default=0.0,
        help="share of 503 answers (%(default)s)",
    )
    rooms.add_argument("--seed", type=int, default=0, help="seeds jitter and failures")
    rooms.set_defaults(handler=_rooms)

    run = commands.add_parser("run", help="worker + simulator + live status (make run)")
    run.add_argument("--duration", type=float, default=None, help="stop after N seconds")
    run.add_argument("--rate", type=float, default=100.0, help="simulated readings per second")
    run.set_defaults(handler=_run)

    from tools.chaos.cli import add_arguments  # argparse only: --help stays fast

    chaos = commands.add_parser("chaos", help="exactly-once chaos runs: faults + verification")
    add_arguments(chaos)
    chaos.set_defaults(handler=_chaos)

    from tools.fleet.cli import add_arguments as fleet_arguments

    fleet = commands.add_parser(
        "fleet",
        help="chaos runs on 3 brokers and 3 workers with hosts of their own: network faults",
    )
    fleet_arguments(fleet)
    fleet.set_defaults(handler=_fleet)

    from tools.kafkaeos.cli import add_arguments as eos_arguments

    eos_kafka = commands.add_parser(
        "eos-kafka", help="Kafka's own exactly-once system test, Eddy as the application"
    )
    eos_arguments(eos_kafka)
    eos_kafka.set_defaults(handler=_eos_kafka)

    docs = commands.add_parser(
        "docs", help="write the generated tables of the docs (settings, topics) from the code"
    )
    docs.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a table is out of date"
    )
    docs.set_defaults(handler=_docs)
    return parser


def _actions(
    commands: argparse._SubParsersAction[ToolsParser],
    name: str,
    what: str,
    handler: Callable[[argparse.Namespace], int],
    actions: dict[str, str],
) -> dict[str, ToolsParser]:
    """A command whose first argument is its action (``kafka start``): one parser
    per action, listed in the order given, each with its help; ``status`` takes
    ``--json``. The parsers by action, for the options only one action takes."""
    command = commands.add_parser(name, help=what)
    subparsers = command.add_subparsers(dest="action", required=True, metavar="action")
    parsers = {action: subparsers.add_parser(action, help=text) for action, text in actions.items()}
    if "status" in parsers:
        _json(parsers["status"])
    command.set_defaults(handler=handler)
    return parsers


def _json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure()
    # aiokafka logs every failed connection attempt; the command's own error says it once.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    try:
        return int(args.handler(args))
    except EddyError as exc:
        return print_error("tools", exc)
    except OSError as exc:  # a path or host refused (permissions, disk, DNS): its message names it
        return print_error("tools", exc)
    except KeyboardInterrupt:
        return 130
