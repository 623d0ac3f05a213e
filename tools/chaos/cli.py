"""``python -m tools chaos [run|latency] ...``: the chaos harness's command line.

Only argparse at import time: ``eddy.cli`` builds this parser for ``--help``
and imports the harness itself when the command runs.
"""

from __future__ import annotations

import argparse
from typing import Any

EPILOG = """examples:
  python -m tools chaos --seed 7                       one exactly-once run, every fault kind
  python -m tools chaos --seeds 20                     seeds 1..20 (make chaos)
  python -m tools chaos --guarantee at_least_once --faults kill --faults-per-kind 3 \\
      --expect-duplicates                                the negative control
  python -m tools chaos --replay .eddy/chaos/<run>/schedule.json
  python -m tools chaos latency --commit-interval-ms 100 1000
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "mode", nargs="?", choices=["run", "latency"], default="run",
        help="run: faults + verification (default); latency: the latency floor per commit interval",
    )  # fmt: skip
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, default=None, help="one run with this seed")
    seeds.add_argument("--seeds", type=int, default=None, help="N runs: seeds 1..N")
    seeds.add_argument("--replay", default=None, help="re-run a run's schedule.json exactly")
    parser.add_argument("--first-seed", type=int, default=1, help="first seed of --seeds")
    parser.add_argument("--records", type=int, default=20_000, help="checker records per run")
    parser.add_argument("--keys", type=int, default=500, help="checker keys")
    parser.add_argument("--readings", type=int, default=10_000, help="sensor readings per run")
    parser.add_argument("--sensors", type=int, default=20, help="sensors")
    parser.add_argument("--workers", type=int, default=2, help="workers at the start")
    parser.add_argument("--faults", default="all", help="all, or a list: kill,term,zombie,...")
    parser.add_argument("--faults-per-kind", type=int, default=1, help="faults of each kind")
    parser.add_argument(
        "--guarantee", choices=["exactly_once", "at_least_once"], default="exactly_once",
        help="the workers' EDDY_PROCESSING_GUARANTEE: exactly_once (checked: no duplicates) "
        "or at_least_once (the negative control)",
    )  # fmt: skip
    parser.add_argument(
        "--expect-duplicates", action="store_true",
        help="negative control: succeed only if duplicates are found",
    )  # fmt: skip
    parser.add_argument(
        "--commit-interval-ms", type=int, nargs="+", default=None,
        help="EDDY_COMMIT_INTERVAL_MS (run: 100; latency: 100 1000, side by side)",
    )  # fmt: skip
    parser.add_argument(
        "--session-timeout-ms", type=int, default=6_000,
        help="the workers' EDDY_SESSION_TIMEOUT_MS: how soon a killed worker's partitions move",
    )  # fmt: skip
    parser.add_argument(
        "--window-firings-per-checkpoint", type=int, default=10_000,
        help="the workers' EDDY_WINDOW_FIRINGS_PER_CHECKPOINT (small: the windows one "
        "watermark closes fire over several checkpoints, between which faults land)",
    )  # fmt: skip
    parser.add_argument(
        "--duration", type=float, default=0.0,
        help="seconds to produce the input over (default: about 8 s per fault)",
    )  # fmt: skip
    parser.add_argument(
        "--brokers", type=int, default=0,
        help="0: the local broker; N: a KRaft cluster of N brokers (KAFKA_VERSION) on "
        ":19092.., replication N, min.insync.replicas 2, where broker faults kill a leader",
    )  # fmt: skip
    parser.add_argument("--keep-topics", action="store_true", help="keep a passing run's topics")
    parser.add_argument("--fail-fast", action="store_true", help="stop at the first failing seed")
    parser.add_argument(
        "--out", default=None, help="folder for the run folders (default: $EDDY_HOME/chaos)"
    )
    parser.add_argument("--rate", type=float, default=200.0, help="latency: records per second")
    parser.add_argument("--seconds", type=float, default=15.0, help="latency: seconds per interval")


def run_cli(args: argparse.Namespace) -> int:
    """Exit 0 only if every run passed (clean, or duplicates found with
    ``--expect-duplicates``); 1 if a run failed; 2 for a usage error (EddyError)."""
    import asyncio
    from dataclasses import replace
    from pathlib import Path

    from rich.console import Console

    from tools.chaos.errors import ChaosError
    from tools.chaos.schedule import RunConfig, load, make_schedule, parse_kinds

    quiet_harness_logs()
    console = Console()
    intervals = args.commit_interval_ms
    if args.mode == "latency":
        from tools.chaos.latency import measure, render_latency

        rows = asyncio.run(measure(intervals or [100, 1000], args.rate, args.seconds, console))
        render_latency(rows, console)
        return 0
    if intervals is not None and len(intervals) != 1:
        raise ChaosError("a chaos run takes one --commit-interval-ms")
    if args.replay:
        schedules = [load(Path(args.replay))]
        if schedules[0].config.fleet:
            raise ChaosError(
                f"{args.replay} is a fleet run's: replay it with python -m tools fleet --replay"
            )
        console.print(f"replaying {args.replay}", markup=False)
    else:
        seeds = seeds_of(args)
        base = RunConfig(
            seed=seeds[0],
            records=args.records,
            keys=args.keys,
            readings=args.readings,
            sensors=args.sensors,
            workers=args.workers,
            kinds=parse_kinds(args.faults),
            faults_per_kind=args.faults_per_kind,
            guarantee=args.guarantee,
            commit_interval_ms=intervals[0] if intervals else 100,
            session_timeout_ms=args.session_timeout_ms,
            window_firings_per_checkpoint=args.window_firings_per_checkpoint,
            duration_s=args.duration,
        )
        schedules = [make_schedule(replace(base, seed=seed)) for seed in seeds]
    results: list[Any] = []
    brokers = _cluster(args.brokers, console)
    try:
        run_schedules(schedules, args, console, results, brokers=brokers)
    finally:
        if brokers is not None:
            brokers.wipe()
    return summed_up(results, console)


def quiet_harness_logs() -> None:
    """Their INFO lines would bury the progress display; aiokafka's connection ERRORs
    while a broker is down by design are expected, and the harness checks results."""
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    logging.getLogger("eddy.topics").setLevel(logging.WARNING)


def seeds_of(args: argparse.Namespace) -> list[int]:
    """``--seed`` (or ``--first-seed``) alone, or ``--seeds`` of them from ``--first-seed``."""
    if args.seeds is None:
        return [args.seed if args.seed is not None else args.first_seed]
    return list(range(args.first_seed, args.first_seed + args.seeds))


def run_schedules(
    schedules: list[Any],
    args: argparse.Namespace,
    console: Any,
    results: list[Any],
    **where: Any,
) -> None:
    """Run each schedule (``where``: the cluster or fleet it runs on), appending to
    ``results`` as they end, so a caller that is interrupted still has them."""
    import asyncio
    from pathlib import Path

    from tools.chaos.report import render
    from tools.chaos.runner import run_chaos

    for schedule in schedules:
        result = asyncio.run(
            run_chaos(
                schedule,
                expect_duplicates=args.expect_duplicates,
                root=Path(args.out) if args.out else None,
                console=console,
                keep_topics=args.keep_topics,
                **where,
            )
        )
        render(result, console)
        results.append(result)
        if args.fail_fast and not result.passed:
            break


def summed_up(results: list[Any], console: Any) -> int:
    """The runs' summary (several runs) and the exit code: 0 only if all passed."""
    from tools.chaos.report import render_summary

    if len(results) > 1:
        render_summary(results, console)
    return 0 if all(r.passed for r in results) else 1


def _cluster(nodes: int, console: Any) -> Any:
    """Start a cluster of ``nodes`` brokers and point the run's settings at it
    (``EDDY_BOOTSTRAP_SERVERS``, ``EDDY_REPLICATION_FACTOR``); None for the local broker."""
    if not nodes:
        return None
    import os

    from tools.localkafka.cluster import Brokers
    from tools.localkafka.config import configured_version

    brokers = Brokers(configured_version(), nodes)
    console.print(f"starting {nodes} Kafka broker(s) in {brokers.home}", markup=False)
    os.environ["EDDY_BOOTSTRAP_SERVERS"] = brokers.start()
    os.environ["EDDY_REPLICATION_FACTOR"] = str(nodes)
    return brokers
