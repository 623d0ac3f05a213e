"""The atheris engine, in a process of its own: ``python -m tools.fuzz.libfuzzer``
(started by ``python -m tools.fuzz``; libFuzzer ends the process that runs it).

The decoders' Python code (Eddy's, jsonschema's, fastavro's Python parts) is
instrumented, so libFuzzer keeps the inputs that reach new lines and mutates
them further. The figures are written to ``--figures`` every 10,000 inputs and
when the run ends, then the process exits.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import atheris  # type: ignore[import-untyped]

# Instrumented, so coverage guides the inputs: what decodes, and what it calls in Python.
INSTRUMENTED = ["eddy", "tools.fuzz", "jsonschema", "referencing", "fastavro", "pydantic"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.fuzz.libfuzzer")
    parser.add_argument("--inputs", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-len", type=int, default=2_048)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--figures", type=Path, required=True)
    args = parser.parse_args(argv)

    with atheris.instrument_imports(include=INSTRUMENTED):
        from tools.fuzz.runner import Runner
        from tools.fuzz.targets import build_targets, seed_inputs

    targets = build_targets()
    runner = Runner(targets, args.out, "atheris (libFuzzer)")
    seeds = seed_inputs(targets)
    corpus = Path(tempfile.mkdtemp(prefix="eddy-fuzz-corpus-"))
    for n, seed in enumerate(seeds):
        (corpus / f"seed-{n:03d}").write_bytes(seed)
    deadline = time.monotonic() + args.seconds if args.seconds else float("inf")
    measuring_from = len(seeds)

    def test_one(data: bytes) -> None:
        runner.one(data)
        count = runner.figures.inputs
        if count == measuring_from:
            runner.start_measuring()
        if count % 10_000 == 0:
            runner.write(args.figures)
        if (args.inputs and count >= args.inputs) or (
            count % 256 == 0 and time.monotonic() > deadline
        ):
            runner.write(args.figures)
            sys.stdout.flush()
            os._exit(0)  # libFuzzer would go on: the run is done

    libfuzzer_args = [
        sys.argv[0],
        str(corpus),
        f"-max_len={args.max_len}",
        f"-seed={args.seed}",
        "-timeout=10",  # an input stuck this long (s) is a finding libFuzzer reports
        "-rss_limit_mb=4096",
        f"-artifact_prefix={args.out}/",
        "-print_final_stats=1",
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    atheris.Setup(libfuzzer_args, test_one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
