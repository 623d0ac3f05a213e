"""``python -m bench``: Eddy against its ceilings and peers on one pre-loaded input.

Full run (``make bench``): 2M readings over 6 partitions and again over 1, every
contender, the ceilings, latency at half of Eddy's best rate, REST under ingest,
restore; results in ``bench/results/full.{json,md,png}``. ``--quick`` (``make
bench-quick``): 20k readings, every contender once, and only correctness is
asserted. ``python -m bench.core`` is the separate in-process core benchmark.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from confluent_kafka import KafkaException  # type: ignore[import-untyped]
from rich.console import Console

from bench.contenders import BY_NAME
from bench.errors import BenchError
from bench.run import EXTRAS, Options, default_contenders, execute

FULL_READINGS = 2_000_000
QUICK_READINGS = 20_000
ONE_PARTITION = ["aiokafka-consume", "eddy-eos-100ms", "quix-eos-100ms", "kstreams-eos-100ms"]


def parse(argv: list[str]) -> Options:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="20k readings, correctness only")
    parser.add_argument("--readings", type=int, help="readings to pre-load (default 2,000,000)")
    parser.add_argument(
        "--only", help="comma-separated contenders (default all): " + ", ".join(BY_NAME)
    )
    parser.add_argument(
        "--partitions", default=None, help="input variants, comma-separated (default 6,1)"
    )
    parser.add_argument(
        "--cap-s",
        type=float,
        help="longest one drain may take (300 s; quick 180 s): the rate is measured over "
        "what was drained by then",
    )
    parser.add_argument("--no-extras", action="store_true", help="skip latency, REST, restore")
    parser.add_argument(
        "--extras",
        help="only these measurements after the drains, comma-separated (default all): "
        + ", ".join(EXTRAS),
    )
    parser.add_argument("--latency-s", type=int, default=45, help="seconds of offered load")
    parser.add_argument(
        "--eddy-src",
        type=Path,
        help="run Eddy's worker from this source tree (e.g. a git archive of a commit)",
    )
    parser.add_argument("--results-dir", type=Path, default=Path("bench/results"))
    parser.add_argument("--suite", help="results file name (default full, quick or reduced)")
    args = parser.parse_args(argv)
    readings = args.readings or (QUICK_READINGS if args.quick else FULL_READINGS)
    contenders = args.only.split(",") if args.only else default_contenders()
    unknown = [n for n in contenders if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown contender(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    extras = args.extras.split(",") if args.extras else list(EXTRAS)
    unknown = [n for n in extras if n not in EXTRAS]
    if unknown:
        parser.error(f"unknown extra(s) {', '.join(unknown)}; known: {', '.join(EXTRAS)}")
    partitions_text = args.partitions or ("6" if args.quick else "6,1")
    suite = args.suite or (
        "quick" if args.quick else "full" if readings >= FULL_READINGS else "reduced"
    )
    return Options(
        readings=readings,
        partitions=[int(p) for p in partitions_text.split(",")],
        contenders=contenders,
        one_partition=ONE_PARTITION,
        cap_s=args.cap_s or (180.0 if args.quick else 300.0),
        quick=args.quick,
        results_dir=args.results_dir,
        suite=suite,
        extras=frozenset(() if args.quick or args.no_extras else extras),
        latency_s=args.latency_s,
        eddy_src=args.eddy_src.resolve() if args.eddy_src else None,
    )


def _interrupt(_signum: int, _frame: object) -> None:
    # SIGTERM (a timeout, a CI cancel) unwinds like Ctrl-C: contenders are stopped and
    # the run's topics deleted on the way out.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    console = Console(stderr=True)
    options = parse(sys.argv[1:] if argv is None else argv)
    try:
        results = execute(options, console)
        from bench.report import write

        write(results, options, console)
    except (BenchError, KafkaException) as exc:
        console.print(f"[red]bench: {exc}[/red]")
        return 1
    except KeyboardInterrupt:
        console.print("[yellow]bench: interrupted[/yellow]")
        return 130
    failures = results.get("failures", [])
    for failure in failures:
        console.print(f"[red]wrong results: {failure}[/red]")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
