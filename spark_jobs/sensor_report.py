"""Sensor report: per sensor and hour, min/avg/max/stddev of the 5 s window
averages; alert counts by kind; sensors ranked by anomaly rate.

Inputs: ``sensor_averages``' window results (as far back as results retention
keeps them) and ``sensor_alerts``' ``counts`` state: each sensor's readings and
alerts by kind, counted by the agent since the sensor's state began. The anomaly
rate is a sensor's alerts per reading over that same span, so numerator and
denominator count the same readings (the latest-alerts list, capped at 20 per
sensor, would rank sensors by their reading counts alone).
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
from eddy.spark_jobs.ranking import with_rank

NAME = "sensor_report"
STATS = T.StructType(
    [
        T.StructField("count", T.LongType()),
        T.StructField("avg", T.DoubleType()),
        T.StructField("min", T.DoubleType()),
        T.StructField("max", T.DoubleType()),
    ]
)
# eddy.examples.sensor_alerts.Counts, as stored (JSON).
COUNTS = T.StructType(
    [
        T.StructField("readings", T.LongType()),
        T.StructField("alerts", T.MapType(T.StringType(), T.LongType())),
        T.StructField("since_ms", T.LongType()),
    ]
)


class SensorReport(NamedTuple):
    hourly: DataFrame
    alerts_by_kind: DataFrame
    ranking: DataFrame


def transform(results: DataFrame, counts: DataFrame) -> SensorReport:
    """``results``/``counts``: snapshot rows (eddy.tables.export.schema()) of
    sensor_averages' ``results`` and sensor_alerts' ``state.counts``."""
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
    sensors = counts.select(
        F.col("key").alias("sensor_id"), F.from_json("value", COUNTS).alias("c")
    ).select("sensor_id", "c.readings", "c.alerts", "c.since_ms")
    alerts_by_kind = sensors.select("sensor_id", F.explode("alerts").alias("kind", "alerts")).where(
        F.col("alerts") > 0
    )
    per_sensor = sensors.select(
        "sensor_id",
        "since_ms",
        "readings",
        # The sum of the map's values (0 for a sensor without alerts).
        F.aggregate(F.map_values("alerts"), F.lit(0).cast("long"), lambda a, b: a + b).alias(
            "alerts"
        ),
    ).withColumn("anomaly_rate", F.col("alerts") / F.col("readings"))
    ranking = with_rank(per_sensor, F.desc("anomaly_rate"), F.asc("sensor_id"))
    return SensorReport(
        hourly.orderBy("sensor_id", "hour_start_ms"),
        alerts_by_kind.orderBy("sensor_id", "kind"),
        ranking.orderBy("rank"),
    )


def build_parser() -> argparse.ArgumentParser:
    return common.parser(__doc__.splitlines()[0], prog=f"python -m eddy.spark_jobs.{NAME}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    snapshot = common.Snapshot.open(args.root, args.app, args.snapshot)
    spark = common.session(NAME, args.master)
    report = transform(
        snapshot.table(spark, "sensor_averages", "results"),
        snapshot.table(spark, "sensor_alerts", "state.counts"),
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
            "Alerts and readings are counted by sensor_alerts since each sensor's state "
            "began (`since_ms`: its first reading, or its first after an hour of silence).",
            "",
            common.markdown_table(
                ranking, ["rank", "sensor_id", "alerts", "readings", "anomaly_rate", "since_ms"]
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
