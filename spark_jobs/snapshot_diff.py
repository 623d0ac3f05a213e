"""Snapshot diff: the keys added, removed and changed between two snapshots of one
app, per pipeline and table (for audits and backfills).

A row's identity is (pipeline, table, encoded key); "changed" means its value
differs. By default the newest snapshot is compared with the one before it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NamedTuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eddy.snapshot.layout import SnapshotNotFoundError, SnapshotRoot
from eddy.spark_jobs import common

NAME = "snapshot_diff"
IDENTITY = ["pipeline", "table", "raw_key"]


class Diff(NamedTuple):
    changes: DataFrame
    summary: DataFrame


def transform(old: DataFrame, new: DataFrame) -> Diff:
    """``old``/``new``: every row of a snapshot, with ``pipeline`` and ``table``."""
    columns = ["key", "window_start_ms", "window_end_ms", "value", "partition"]
    before = old.select(*IDENTITY, *[F.col(c).alias(f"old_{c}") for c in columns])
    after = new.select(*IDENTITY, *[F.col(c).alias(f"new_{c}") for c in columns])
    joined = before.join(after, IDENTITY, "full_outer")
    change = (
        F.when(F.col("old_key").isNull(), "added")
        .when(F.col("new_key").isNull(), "removed")
        .when(~F.col("old_value").eqNullSafe(F.col("new_value")), "changed")
    )
    changes = (
        joined.withColumn("change", change)
        .where(F.col("change").isNotNull())
        .select(
            "pipeline",
            "table",
            F.coalesce("new_key", "old_key").alias("key"),
            F.coalesce("new_window_start_ms", "old_window_start_ms").alias("window_start_ms"),
            "change",
            "old_value",
            "new_value",
            "raw_key",
        )
    )
    summary = changes.groupBy("pipeline", "table", "change").agg(F.count("*").alias("keys"))
    return Diff(
        changes.orderBy("pipeline", "table", "raw_key"),
        summary.orderBy("pipeline", "table", "change"),
    )


def build_parser() -> argparse.ArgumentParser:
    p = common.parser(__doc__.splitlines()[0], prog=f"python -m eddy.spark_jobs.{NAME}")
    p.add_argument(
        "--from",
        dest="from_id",
        default=None,
        help="older snapshot (default: the one before --snapshot)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    new = common.Snapshot.open(args.root, args.app, args.snapshot)
    from_id = args.from_id
    if from_id is None:
        older = [
            m["snapshot_id"]
            for m in SnapshotRoot.open(args.root).manifests(args.app)
            if m["snapshot_id"] < new.snapshot_id
        ]
        if not older:
            raise SnapshotNotFoundError(
                f"snapshot {new.snapshot_id} is the oldest of {args.app}: nothing to compare "
                "with; take another snapshot or pass --from"
            )
        from_id = older[-1]
    old = common.Snapshot.open(args.root, args.app, from_id)
    spark = common.session(NAME, args.master)
    diff = transform(old.everything(spark), new.everything(spark))
    out = common.output_dir(args.out, NAME, new.snapshot_id)
    common.write_outputs(out, diff._asdict())
    summary = diff.summary.collect()
    common.bar_chart(
        out / "changes.png",
        [f"{r['pipeline']}.{r['table']} {r['change']}" for r in summary],
        [r["keys"] for r in summary],
        f"Changes from {old.snapshot_id} to {new.snapshot_id}",
        "keys",
    )
    path = common.write_report(
        out,
        f"Snapshot diff: {old.snapshot_id} -> {new.snapshot_id}",
        new,
        [
            "![changes](changes.png)",
            "",
            common.markdown_table(summary, ["pipeline", "table", "change", "keys"], limit=200),
        ],
    )
    print(f"{NAME}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(common.run(main, sys.argv[1:]))
