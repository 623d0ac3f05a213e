"""Vehicle speed report: how the app's speed differs from the OBD device's, per
vehicle (distribution), the vehicles that disagree most, and agreement over time.

Input: ``vehicle_speed``'s per-second checks (window results) in the snapshot.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NamedTuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eddy.spark_jobs import common

NAME = "vehicle_speed_report"
WORST = 10
CHECK = T.StructType(
    [
        T.StructField("obd_speed_kmh", T.DoubleType()),
        T.StructField("app_speed_kmh", T.DoubleType()),
        T.StructField("diff_kmh", T.DoubleType()),
        T.StructField("within_tolerance", T.BooleanType()),
    ]
)


class VehicleReport(NamedTuple):
    distribution: DataFrame
    worst: DataFrame
    over_time: DataFrame


def transform(checks: DataFrame, worst_n: int = WORST) -> VehicleReport:
    """``checks``: snapshot rows of vehicle_speed's ``results`` table."""
    rows = checks.select(
        F.col("key").alias("vehicle_id"),
        F.col("window_start_ms").alias("second_ms"),
        F.from_json("value", CHECK).alias("c"),
    ).select("vehicle_id", "second_ms", "c.diff_kmh", "c.within_tolerance")
    distribution = rows.groupBy("vehicle_id").agg(
        F.count("*").alias("checks"),
        F.avg("diff_kmh").alias("mean_diff_kmh"),
        F.stddev_samp("diff_kmh").alias("stddev_diff_kmh"),
        F.min("diff_kmh").alias("min_diff_kmh"),
        # Exact percentiles (linear interpolation), not approximations.
        F.expr("percentile(diff_kmh, 0.5)").alias("p50_diff_kmh"),
        F.expr("percentile(diff_kmh, 0.9)").alias("p90_diff_kmh"),
        F.max("diff_kmh").alias("max_diff_kmh"),
        F.avg(F.abs("diff_kmh")).alias("mean_abs_diff_kmh"),
        F.avg(F.col("within_tolerance").cast("double")).alias("agreement_rate"),
    )
    worst = distribution.orderBy(
        F.asc("agreement_rate"), F.desc("mean_abs_diff_kmh"), F.asc("vehicle_id")
    ).limit(worst_n)
    over_time = (
        rows.withColumn(
            "minute_start_ms", F.floor(F.col("second_ms") / common.MINUTE_MS) * common.MINUTE_MS
        )
        .groupBy("minute_start_ms")
        .agg(
            F.count("*").alias("checks"),
            F.avg(F.col("within_tolerance").cast("double")).alias("agreement_rate"),
        )
    )
    return VehicleReport(
        distribution.orderBy("vehicle_id"), worst, over_time.orderBy("minute_start_ms")
    )


def build_parser() -> argparse.ArgumentParser:
    return common.parser(__doc__.splitlines()[0], prog=f"python -m eddy.spark_jobs.{NAME}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    snapshot = common.Snapshot.open(args.root, args.app, args.snapshot)
    spark = common.session(NAME, args.master)
    report = transform(snapshot.table(spark, "vehicle_speed", "results"))
    out = common.output_dir(args.out, NAME, snapshot.snapshot_id)
    common.write_outputs(out, report._asdict())
    over_time = report.over_time.collect()
    common.line_chart(
        out / "agreement_over_time.png",
        [(r["minute_start_ms"] - over_time[0]["minute_start_ms"]) / 60_000 for r in over_time],
        [r["agreement_rate"] for r in over_time],
        "Share of checks where the app agrees with OBD (x: minutes)",
        "agreement rate",
    )
    columns = ["vehicle_id", "checks", "agreement_rate", "mean_diff_kmh", "p50_diff_kmh"]
    path = common.write_report(
        out,
        "Vehicle speed report",
        snapshot,
        [
            "## Agreement over time",
            "",
            "![agreement](agreement_over_time.png)",
            "",
            "## Vehicles whose app disagrees most",
            "",
            common.markdown_table(report.worst.collect(), [*columns, "mean_abs_diff_kmh"]),
            "",
            "## OBD-vs-app difference per vehicle",
            "",
            common.markdown_table(
                report.distribution.collect(),
                [*columns, "p90_diff_kmh", "stddev_diff_kmh", "min_diff_kmh", "max_diff_kmh"],
                limit=100,
            ),
        ],
    )
    print(f"{NAME}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(common.run(main, sys.argv[1:]))
