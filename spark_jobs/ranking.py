"""Ranking rows 1..n without a global window.

``row_number().over(Window.orderBy(...))`` has no partition to split on, so Spark
moves every row to one task ("No Partition Defined for Window operation"). Here
the sort is Spark's distributed one (range partitions, each sorted), and a row's
rank is the rows in the partitions before it plus its place in its own.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

_PART = "_rank_partition"
_ID = "_rank_id"


def with_rank(df: DataFrame, *order: Column, name: str = "rank") -> DataFrame:
    """``df`` with a column ``name``: 1 for the first row by ``order``, then 2, 3...

    ``order`` must make the order total (end it with a unique column), or rows
    that tie get their ranks in no fixed order. The sorted rows are materialised
    once (a local checkpoint): each action would otherwise sample the range
    partitions again, and the per-partition counts could then belong to another
    partitioning than the rows they number. So this runs two small jobs when
    called, not when the result is used.
    """
    # monotonically_increasing_id() is the partition index in the upper bits and
    # the row's place in its partition below: consecutive within a partition.
    ordered = (
        df.orderBy(*order)
        .withColumn(_PART, F.spark_partition_id())
        .withColumn(_ID, F.monotonically_increasing_id())
        .localCheckpoint()
    )
    sizes = ordered.groupBy(_PART).agg(F.count("*").alias("rows"), F.min(_ID).alias("first"))
    before = 0
    starts: list[Column] = []
    for row in sorted(sizes.collect(), key=lambda r: int(r[_PART])):
        # rank = rows in earlier partitions + (id - the partition's first id) + 1
        starts += [F.lit(int(row[_PART])), F.lit(before - int(row["first"]) + 1)]
        before += int(row["rows"])
    if not starts:
        return ordered.drop(_PART, _ID).withColumn(name, F.lit(None).cast("long"))
    start = F.create_map(*starts)[F.col(_PART)]
    return ordered.withColumn(name, F.col(_ID) + start).drop(_PART, _ID)
