"""``python -m eddy.spark_jobs [job options]``: every job on the newest snapshot, in one
Spark session; prints where each report is. ``make analytics`` runs this."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module

from eddy.snapshot.layout import SnapshotNotFoundError
from eddy.spark_jobs import JOBS, common


def build_parser() -> argparse.ArgumentParser:
    return common.parser(
        f"Run every job ({', '.join(JOBS)}) on one snapshot of an app, in one Spark "
        "session, and print where each report is. Each job also runs alone: "
        "python -m eddy.spark_jobs.<job>.",
        prog="python -m eddy.spark_jobs",
    )


def main(argv: Sequence[str] | None = None) -> int:
    # The jobs take the same options: checked here first, so --help and a usage
    # error name this command rather than the first job.
    build_parser().parse_args(argv)
    for name in JOBS:
        job = import_module(f"eddy.spark_jobs.{name}")
        try:
            job.main(argv)
        except SnapshotNotFoundError as exc:
            if name != "snapshot_diff":
                raise
            print(f"{name}: skipped ({exc})")
    return 0


if __name__ == "__main__":
    sys.exit(common.run(main, sys.argv[1:]))
