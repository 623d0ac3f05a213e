"""What every job shares: arguments, the Spark session, reading a snapshot's
tables, writing outputs and the markdown + PNG report."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eddy.cli_parser import OneLineParser, print_error
from eddy.errors import EddyError
from eddy.paths import eddy_home, root_in_home
from eddy.snapshot.layout import SnapshotRoot
from eddy.spark_jobs.objectstore import s3a_conf
from eddy.tables.export import SCHEMA_VERSION

HOUR_MS = 3_600_000
MINUTE_MS = 60_000

# eddy.tables.export.schema(), as Spark names it.
ROW_SCHEMA = T.StructType(
    [
        T.StructField("key", T.StringType(), False),
        T.StructField("window_start_ms", T.LongType()),
        T.StructField("window_end_ms", T.LongType()),
        T.StructField("value", T.StringType()),
        T.StructField("raw_key", T.BinaryType(), False),
    ]
)


def parser(description: str, prog: str) -> argparse.ArgumentParser:
    """The options every job takes; ``prog`` is how the job is run (its usage and
    its one-line errors name it)."""
    p = OneLineParser(prog=prog, description=description)
    home = eddy_home()  # the worker's rule (service/paths.py), so both find one root
    p.add_argument(
        "--root",
        default=root_in_home(os.environ.get("EDDY_SNAPSHOT_ROOT", "snapshots"), home),
        help="snapshot root: a path or s3://bucket/prefix (default: EDDY_SNAPSHOT_ROOT, "
        "relative to EDDY_HOME)",
    )
    p.add_argument("--app", default=os.environ.get("EDDY_APP_ID", "eddy"), help="the app id")
    p.add_argument("--snapshot", default=None, help="a snapshot id (default: the newest)")
    p.add_argument(
        "--out",
        default=str(home / "reports"),
        help="where reports go (default: $EDDY_HOME/reports, now %(default)s)",
    )
    p.add_argument(
        "--master", default=None, help="Spark master (default: spark-submit's, or local[*])"
    )
    return p


def session(name: str, master: str | None = None) -> SparkSession:
    builder = SparkSession.builder.appName(f"eddy-{name}")
    if master:  # otherwise spark-submit's --master, or local[*] when run by python
        builder = builder.master(master)
    for key, value in s3a_conf(os.environ).items():  # the workers' store, for s3a://
        builder = builder.config(key, value)
    return (
        builder.config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )


@dataclass(frozen=True)
class Snapshot:
    """One complete snapshot, opened by its manifest."""

    root: SnapshotRoot
    manifest: dict[str, Any]

    @classmethod
    def open(cls, root_uri: str, app_id: str, snapshot_id: str | None = None) -> Snapshot:
        root = SnapshotRoot.open(root_uri)
        manifest = root.manifest(app_id, snapshot_id)
        if manifest["schema_version"] != SCHEMA_VERSION:
            raise EddyError(
                f"snapshot {manifest['snapshot_id']} has schema version "
                f"{manifest['schema_version']}; these jobs read {SCHEMA_VERSION}: "
                "run the jobs of the Eddy version that wrote it"
            )
        return cls(root, manifest)

    @property
    def snapshot_id(self) -> str:
        return str(self.manifest["snapshot_id"])

    @property
    def location(self) -> str:
        return self.root.url_of(
            self.root.snapshot_dir(self.manifest["app_id"], self.manifest["snapshot_id"])
        )

    def table(self, spark: SparkSession, pipeline: str, table: str) -> DataFrame:
        """One table of one pipeline, with a ``partition`` column. Only the files
        the manifest lists are read (never those of a crashed export)."""
        files = [self.root.url_of(f) for f in self.root.files(self.manifest, pipeline, table)]
        if not files:
            empty = spark.createDataFrame([], ROW_SCHEMA)
            return empty.withColumn("partition", F.lit(None).cast("int"))
        df = spark.read.schema(ROW_SCHEMA).parquet(*files)
        return df.withColumn(
            "partition", F.regexp_extract(F.input_file_name(), r"partition=(\d+)", 1).cast("int")
        )

    def everything(self, spark: SparkSession) -> DataFrame:
        """Every table of every pipeline, with ``pipeline``, ``table``, ``partition``
        (one scan of every listed file: small files pack into few tasks)."""
        files = [
            self.root.url_of(f)
            for pipeline, table in sorted(
                {(p["pipeline"], t) for p in self.manifest["parts"] for t in p["tables"]}
            )
            for f in self.root.files(self.manifest, pipeline, table)
        ]
        df = (
            spark.read.schema(ROW_SCHEMA).parquet(*files)
            if files
            else spark.createDataFrame([], ROW_SCHEMA)
        )
        path = F.input_file_name()
        return df.select(
            "*",
            F.regexp_extract(path, r"partition=(\d+)", 1).cast("int").alias("partition"),
            F.regexp_extract(path, r"pipeline=([^/]+)", 1).alias("pipeline"),
            F.regexp_extract(path, r"table=([^/]+)", 1).alias("table"),
        )


def output_dir(out: str, job: str, snapshot_id: str) -> Path:
    path = Path(out) / snapshot_id / job
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def write_outputs(directory: Path, frames: dict[str, DataFrame]) -> None:
    """Each frame as one Parquet file; cached, so the report's collects reuse it."""
    for name, frame in frames.items():
        frame.cache().coalesce(1).write.mode("overwrite").parquet(
            str(directory / f"{name}.parquet")
        )


def markdown_table(rows: Sequence[Any], columns: Sequence[str], limit: int = 20) -> str:
    """A small markdown table of collected rows (the first ``limit``)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in list(rows)[:limit]:
        cells = []
        for column in columns:
            value = row[column]
            cells.append(f"{value:.3f}" if isinstance(value, float) else str(value))
        lines.append("| " + " | ".join(cells) + " |")
    if not rows:
        lines.append("| " + " | ".join("-" for _ in columns) + " |")
    return "\n".join(lines)


def bar_chart(
    path: Path, labels: Sequence[str], values: Sequence[float], title: str, ylabel: str
) -> None:
    """A PNG bar chart; matplotlib is imported here so ``--help`` stays fast."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4))
    axes.bar(list(labels), list(values), color="#3b7dd8")
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    axes.tick_params(axis="x", rotation=45, labelsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def line_chart(
    path: Path, xs: Sequence[float], ys: Sequence[float], title: str, ylabel: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4))
    axes.plot(list(xs), list(ys), marker="o", color="#3b7dd8")
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write_report(directory: Path, title: str, snapshot: Snapshot, sections: list[str]) -> Path:
    path = directory / "report.md"
    header = [
        f"# {title}",
        "",
        f"Snapshot `{snapshot.snapshot_id}` of app `{snapshot.manifest['app_id']}` "
        f"({snapshot.manifest['rows']} rows), at {snapshot.location}.",
        "",
    ]
    path.write_text("\n".join(header + sections) + "\n")
    return path


def run(job: Any, argv: Sequence[str] | None) -> int:
    """Run a job's ``main`` with one-line errors instead of tracebacks."""
    try:
        return int(job(argv))
    except EddyError as exc:
        return print_error("eddy", exc)
    except OSError as exc:  # a path or host refused (permissions, disk, DNS): its message names it
        return print_error("eddy", exc)
