"""``python -m tools.fuzz [--inputs N] [--seconds S] [--engine atheris|mutator]``.

Prints the inputs run, the findings (exceptions other than DecodeError, crashes,
inputs over 100 ms of CPU), the slowest input and the growth of memory; exits 1
on any finding, a slow input, or memory grown past ``--max-rss-growth-mb``. The
inputs behind each finding are kept under ``--out`` (default
``$EDDY_HOME/fuzz/<time>``), with libFuzzer's log.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

from eddy.paths import eddy_home
from tools.fuzz.runner import Figures, Runner, figures_from, mutate_forever


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.fuzz", description=__doc__)
    parser.add_argument("--inputs", type=int, default=0, help="stop after N inputs (0: none)")
    parser.add_argument("--seconds", type=float, default=0, help="stop after S seconds (0: none)")
    parser.add_argument(
        "--engine",
        choices=("atheris", "mutator"),
        default=None,
        help="atheris (coverage-guided; the default where installed) or the plain mutator",
    )
    parser.add_argument("--seed", type=int, default=1, help="seeds the mutations (%(default)s)")
    parser.add_argument("--max-len", type=int, default=2_048, help="longest input (bytes)")
    parser.add_argument(
        "--max-rss-growth-mb", type=float, default=200.0, help="memory a run may grow by"
    )
    parser.add_argument("--out", type=Path, default=None, help="where findings are kept")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.inputs and not args.seconds:
        args.inputs = 100_000
    out = args.out or eddy_home() / "fuzz" / time.strftime("%Y%m%d-%H%M%S")
    engine = args.engine or ("atheris" if _has_atheris() else "mutator")
    figures = _atheris(args, out) if engine == "atheris" else _mutator(args, out)
    print(figures.summary())
    for described in figures.described:
        print(f"  {described}")
    if figures.findings or figures.slow_inputs:
        print(f"  inputs kept in {out}")
    grown = figures.rss_growth_mb > args.max_rss_growth_mb
    if grown:
        print(f"  memory grew past --max-rss-growth-mb={args.max_rss_growth_mb:.0f}")
    return 1 if figures.findings or figures.slow_inputs or grown else 0


def _has_atheris() -> bool:
    return importlib.util.find_spec("atheris") is not None


def _mutator(args: argparse.Namespace, out: Path) -> Figures:
    from tools.fuzz.targets import build_targets, seed_inputs

    targets = build_targets()
    runner = Runner(targets, out, "mutator")
    seeds = seed_inputs(targets)
    for seed in seeds:
        runner.one(seed)
    runner.start_measuring()
    mutate_forever(runner, seeds, args.inputs, args.seconds, args.seed, args.max_len)
    return runner.finish()


def _atheris(args: argparse.Namespace, out: Path) -> Figures:
    out.mkdir(parents=True, exist_ok=True)
    figures_file, log = out / "figures.json", out / "libfuzzer.log"
    command = [
        sys.executable,
        "-m",
        "tools.fuzz.libfuzzer",
        f"--inputs={args.inputs}",
        f"--seconds={args.seconds}",
        f"--seed={args.seed}",
        f"--max-len={args.max_len}",
        f"--out={out}",
        f"--figures={figures_file}",
    ]
    with log.open("w") as written:
        code = subprocess.run(command, stdout=written, stderr=subprocess.STDOUT, check=False)
    figures = figures_from(figures_file) if figures_file.exists() else Figures(engine="atheris")
    if code.returncode != 0:  # libFuzzer found a crash, a timeout or an out-of-memory
        figures.findings += 1
        tail = log.read_text(errors="replace").splitlines()[-15:]
        figures.described.append(
            f"the fuzzing process ended with code {code.returncode}; {log}:\n    "
            + "\n    ".join(tail)
        )
    return figures


if __name__ == "__main__":
    raise SystemExit(main())
