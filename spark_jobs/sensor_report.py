"""Sensor report: per sensor and hour, min/avg/max/stddev of the 5 s window
averages; alert counts by kind; sensors ranked by anomaly rate.

Inputs: ``sensor_averages``' window results and ``sensor_alerts``' ``recent``
state (each sensor's latest alerts, at most 20). The anomaly rate is a sensor's
alerts in that state per reading in the snapshot's windows: a ranking of
sensors, not a rate over all time (state keeps neither all alerts nor all
windows; a Kafka-side report would read the topics).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NamedTuple

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs import common

NAME = "sensor_report"
STATS = T.StructType(
    [
        T.StructField("count", T.LongType()),
        T.StructField("avg", T.DoubleType()),
        T.StructField("min", T.DoubleType()),
        T.StructField("max", T.DoubleType()),
    ]
)
ALERTS = T.ArrayType(T.StructType([T.StructField("kind", T.StringType())]))


class SensorReport(NamedTuple):
    hourly: DataFrame
    alerts_by_kind: DataFrame
    ranking: DataFrame


def transform(results: DataFrame, recent_alerts: DataFrame) -> SensorReport:
    """``results``/``recent_alerts``: snapshot rows (tables.export.SCHEMA)."""
    windows = results.select(
        F.col("key").alias("sensor_id"),
        (F.floor(F.col("window_start_ms") / common.HOUR_MS) * common.HOUR_MS).alias(
            "hour_start_ms"
        ),
        F.from_json("value", STATS).alias("v"),
    ).select("sensor_id", "hour_start_ms", "v.count", "v.avg")
    hourly = windows.groupBy("sensor_id", "hour_start_ms").agg(
        F.count("*").alias("windows"),
        F.sum("count").alias("readings"),
        F.min("avg").alias("min_avg"),
        F.avg("avg").alias("avg_avg"),
        F.max("avg").alias("max_avg"),
        F.stddev_samp("avg").alias("stddev_avg"),
    )
    alerts = recent_alerts.select(
        F.col("key").alias("sensor_id"), F.explode(F.from_json("value", ALERTS)).alias("alert")
    ).select("sensor_id", F.col("alert.kind").alias("kind"))
    alerts_by_kind = alerts.groupBy("sensor_id", "kind").agg(F.count("*").alias("alerts"))
    readings = windows.groupBy("sensor_id").agg(F.sum("count").alias("readings"))
    per_sensor = alerts.groupBy("sensor_id").agg(F.count("*").alias("alerts"))
    ranked = (
        readings.join(per_sensor, "sensor_id", "left")
        .fillna(0, ["alerts"])
        .withColumn("anomaly_rate", F.col("alerts") / F.col("readings"))
    )
    order = Window.orderBy(F.desc("anomaly_rate"), F.asc("sensor_id"))
    ranking = ranked.withColumn("rank", F.row_number().over(order))
    return SensorReport(
        hourly.orderBy("sensor_id", "hour_start_ms"),
        alerts_by_kind.orderBy("sensor_id", "kind"),
        ranking.orderBy("rank"),
    )


def build_parser() -> argparse.ArgumentParser:
    return common.parser(__doc__.splitlines()[0], prog=f"python -m spark_jobs.{NAME}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    snapshot = common.Snapshot.open(args.root, args.app, args.snapshot)
    spark = common.session(NAME, args.master)
    report = transform(
        snapshot.table(spark, "sensor_averages", "results"),
        snapshot.table(spark, "sensor_alerts", "state.recent"),
    )
    out = common.output_dir(args.out, NAME, snapshot.snapshot_id)
    common.write_outputs(out, report._asdict())
    ranking = report.ranking.collect()
    common.bar_chart(
        out / "anomaly_rate.png",
        [r["sensor_id"] for r in ranking[:20]],
        [r["anomaly_rate"] for r in ranking[:20]],
        "Alerts per reading, by sensor",
        "anomaly rate",
    )
    hourly = report.hourly.collect()
    path = common.write_report(
        out,
        "Sensor report",
        snapshot,
        [
            "## Sensors ranked by anomaly rate",
            "",
            "![anomaly rate](anomaly_rate.png)",
            "",
            common.markdown_table(
                ranking, ["rank", "sensor_id", "alerts", "readings", "anomaly_rate"]
            ),
            "",
            "## Window averages per sensor and hour",
            "",
            common.markdown_table(
                hourly,
                [
                    "sensor_id",
                    "hour_start_ms",
                    "windows",
                    "min_avg",
                    "avg_avg",
                    "max_avg",
                    "stddev_avg",
                ],
                limit=50,
            ),
            "",
            "## Alerts by kind",
            "",
            common.markdown_table(
                report.alerts_by_kind.collect(), ["sensor_id", "kind", "alerts"], 50
            ),
        ],
    )
    print(f"{NAME}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(common.run(main, sys.argv[1:]))
