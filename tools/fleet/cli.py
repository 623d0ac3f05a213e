"""``python -m tools fleet [run|clean] ...``: chaos runs on a fleet of hosts.

Three brokers and three workers, each in a network namespace of its own, and the
chaos harness's runner, verifier and report with the network faults
(``tools.fleet.faults``). Only argparse at import time.
"""

from __future__ import annotations

import argparse
from typing import Any

EPILOG = """examples:
  python -m tools fleet --seed 1                       one run, every network fault kind
  python -m tools fleet --seeds 5                      seeds 1..5 (make fleet)
  python -m tools fleet --seed 1 --guarantee at_least_once --expect-duplicates
                                                       the negative control
  python -m tools fleet --seed 3 --faults cut_long,isolate_leader,kill
  python -m tools fleet clean                          remove what a killed run left behind
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "mode", nargs="?", choices=["run", "clean"], default="run",
        help="run: a fleet, faults + verification (default); clean: delete the namespaces, "
        "bridges and brokers of fleet runs that did not finish",
    )  # fmt: skip
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, default=None, help="one run with this seed")
    seeds.add_argument("--seeds", type=int, default=None, help="N runs: seeds 1..N")
    seeds.add_argument("--replay", default=None, help="re-run a run's schedule.json exactly")
    parser.add_argument("--first-seed", type=int, default=1, help="first seed of --seeds")
    parser.add_argument("--records", type=int, default=5_000, help="checker records per run")
    parser.add_argument("--keys", type=int, default=200, help="checker keys")
    parser.add_argument("--readings", type=int, default=2_000, help="sensor readings per run")
    parser.add_argument(
        "--faults", default="all",
        help="all (every network fault kind), or a list: cut_short,cut_long,cut_peers,"
        "isolate_leader,slow,readdress and the process faults kill,term,zombie,wipe,broker",
    )  # fmt: skip
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
        "--commit-interval-ms", type=int, default=100, help="EDDY_COMMIT_INTERVAL_MS"
    )
    parser.add_argument(
        "--session-timeout-ms", type=int, default=6_000,
        help="EDDY_SESSION_TIMEOUT_MS: a cut_short heals within it",
    )  # fmt: skip
    parser.add_argument(
        "--transaction-timeout-ms", type=int, default=10_000,
        help="EDDY_TRANSACTION_TIMEOUT_MS: a cut_long outlasts it",
    )  # fmt: skip
    parser.add_argument(
        "--duration", type=float, default=0.0,
        help="seconds to produce the input over (default: about 8 s per fault)",
    )  # fmt: skip
    parser.add_argument("--keep-topics", action="store_true", help="keep a passing run's topics")
    parser.add_argument("--fail-fast", action="store_true", help="stop at the first failing seed")
    parser.add_argument(
        "--out", default=None, help="folder for the run folders (default: $EDDY_HOME/chaos)"
    )


def run_cli(args: argparse.Namespace) -> int:
    """Exit 0 only if every run passed; 1 if one failed; 2 for a usage error."""
    from rich.console import Console

    console = Console()
    if args.mode == "clean":
        from tools.fleet.hosts import clean

        removed = clean()
        console.print(
            f"removed {len(removed)}: {' '.join(removed)}" if removed else "nothing to remove",
            markup=False,
        )
        return 0
    return _run(args, console)


def _run(args: argparse.Namespace, console: Any) -> int:
    import os

    from tools.chaos.cli import quiet_harness_logs, run_schedules, summed_up
    from tools.fleet.hosts import BROKERS, WORKERS, Fleet

    quiet_harness_logs()
    schedules = schedules_of(args)
    results: list[Any] = []
    finished = False  # an interrupted run keeps its evidence too
    fleet = Fleet(BROKERS, WORKERS)
    try:
        console.print(
            f"fleet {fleet.tag}: {BROKERS} brokers on {fleet.bootstrap}, {WORKERS} workers on "
            f"{', '.join(h.peers_ip or '' for h in fleet.network.workers)}",
            markup=False,
        )
        os.environ["EDDY_BOOTSTRAP_SERVERS"] = fleet.start()
        os.environ["EDDY_REPLICATION_FACTOR"] = str(BROKERS)
        run_schedules(schedules, args, console, results, fleet=fleet)
        finished = True
    finally:
        failed = not finished or not all(r.passed for r in results)
        fleet.close(keep_data=failed)
        if failed:
            console.print(f"the brokers' logs and data: {fleet.brokers.home}", markup=False)
    return summed_up(results, console)


def schedules_of(args: argparse.Namespace) -> list[Any]:
    """The runs' schedules: ``--replay``'s, or one per seed with the network kinds."""
    from dataclasses import replace
    from pathlib import Path

    from tools.chaos.cli import seeds_of
    from tools.chaos.schedule import NETWORK_KINDS, RunConfig, load, make_schedule, parse_kinds
    from tools.fleet.hosts import WORKERS

    if args.replay:
        return [load(Path(args.replay))]
    seeds = seeds_of(args)
    base = RunConfig(
        seed=seeds[0],
        records=args.records,
        keys=args.keys,
        readings=args.readings,
        workers=WORKERS,
        max_workers=WORKERS + 1,
        kinds=parse_kinds(args.faults, NETWORK_KINDS),
        faults_per_kind=args.faults_per_kind,
        guarantee=args.guarantee,
        commit_interval_ms=args.commit_interval_ms,
        session_timeout_ms=args.session_timeout_ms,
        transaction_timeout_ms=args.transaction_timeout_ms,
        duration_s=args.duration,
        fleet=True,
    )
    return [make_schedule(replace(base, seed=seed)) for seed in seeds]
