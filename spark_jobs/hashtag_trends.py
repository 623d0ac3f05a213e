"""Hashtag trends: the top hashtags of every hour and their growth over the hour
before.

Input: ``hashtag_counts``' 1 min window results in the snapshot (as many as
results retention keeps). Growth compares an hour with the hour right before
it; a hashtag absent in that hour grew from 0 (its growth rate is empty).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NamedTuple

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eddy.spark_jobs import common

NAME = "hashtag_trends"
TOP = 10
COUNT = T.StructType([T.StructField("count", T.LongType())])


class Trends(NamedTuple):
    hourly: DataFrame
    top: DataFrame


def transform(counts: DataFrame, top_n: int = TOP) -> Trends:
    """``counts``: snapshot rows of hashtag_counts' ``results`` table."""
    hourly = (
        counts.select(
            F.col("key").alias("hashtag"),
            (F.floor(F.col("window_start_ms") / common.HOUR_MS) * common.HOUR_MS).alias(
                "hour_start_ms"
            ),
            F.from_json("value", COUNT)["count"].alias("count"),
        )
        .groupBy("hashtag", "hour_start_ms")
        .agg(F.sum("count").alias("mentions"))
    )
    before = hourly.select(
        "hashtag",
        (F.col("hour_start_ms") + common.HOUR_MS).alias("hour_start_ms"),
        F.col("mentions").alias("previous_mentions"),
    )
    with_growth = (
        hourly.join(before, ["hashtag", "hour_start_ms"], "left")
        .withColumn("growth", F.col("mentions") - F.coalesce("previous_mentions", F.lit(0)))
        .withColumn("growth_rate", F.col("growth") / F.col("previous_mentions"))
    )
    order = Window.partitionBy("hour_start_ms").orderBy(F.desc("mentions"), F.asc("hashtag"))
    top = with_growth.withColumn("rank", F.row_number().over(order)).where(F.col("rank") <= top_n)
    return Trends(
        with_growth.orderBy("hashtag", "hour_start_ms"), top.orderBy("hour_start_ms", "rank")
    )


def build_parser() -> argparse.ArgumentParser:
    return common.parser(__doc__.splitlines()[0], prog=f"python -m eddy.spark_jobs.{NAME}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    snapshot = common.Snapshot.open(args.root, args.app, args.snapshot)
    spark = common.session(NAME, args.master)
    trends = transform(snapshot.table(spark, "hashtag_counts", "results"))
    out = common.output_dir(args.out, NAME, snapshot.snapshot_id)
    common.write_outputs(out, trends._asdict())
    top = trends.top.collect()
    newest = [r for r in top if top and r["hour_start_ms"] == top[-1]["hour_start_ms"]]
    common.bar_chart(
        out / "top_hashtags.png",
        [f"#{r['hashtag']}" for r in newest],
        [r["mentions"] for r in newest],
        "Top hashtags of the newest hour",
        "mentions",
    )
    path = common.write_report(
        out,
        "Hashtag trends",
        snapshot,
        [
            "## Top hashtags of the newest hour",
            "",
            "![top hashtags](top_hashtags.png)",
            "",
            "## Top hashtags per hour, with growth over the hour before",
            "",
            common.markdown_table(
                top,
                [
                    "hour_start_ms",
                    "rank",
                    "hashtag",
                    "mentions",
                    "previous_mentions",
                    "growth",
                    "growth_rate",
                ],
                limit=100,
            ),
        ],
    )
    print(f"{NAME}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(common.run(main, sys.argv[1:]))
