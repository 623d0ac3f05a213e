"""The jobs on a Spark standalone cluster, as on a real one: a master and a worker
from pyspark's own distribution, every job submitted with ``spark-submit --master
spark://...``, its code shipped as ``--py-files`` (a zip of the parts of the eddy
package the jobs use) and hadoop-aws as ``--jars``, reading the snapshots through
``s3a://`` from a real S3-compatible server (moto's). Each job's outputs must equal local mode's
on the same snapshots.
"""

from __future__ import annotations

import math
import sys
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from eddy.snapshot.layout import SnapshotRoot, snapshot_id_at
from eddy.spark_jobs import JOBS
from tests.spark import inputs
from tests.spark.conftest import APP
from tests.support.s3 import s3_server, upload  # noqa: F401 (fixture)
from tools.s3 import LocalS3
from tools.spark import jars
from tools.spark.cluster import StandaloneCluster, package

pytestmark = pytest.mark.spark
REPOSITORY = Path(__file__).resolve().parents[2]


def rows(directory: Path) -> list[tuple[Any, ...]]:
    """A Parquet output's rows, in a fixed order, floats to 9 significant digits: a
    sum over other partitions may differ in its last bits, not in what it says."""

    def cell(value: Any) -> Any:
        if isinstance(value, float) and math.isfinite(value) and value != 0:
            return float(f"{value:.9g}")
        return value

    table = pq.read_table(directory).to_pylist()
    return sorted((tuple(cell(v) for v in row.values()) for row in table), key=repr)


def report_without_location(path: Path) -> str:
    # The header says where the snapshot is: a local path here, s3a:// there.
    return "\n".join(line for line in path.read_text().splitlines() if " rows), at " not in line)


def test_every_job_on_a_standalone_cluster_equals_local_mode(
    snapshots: SnapshotRoot,
    local_reports: Path,
    s3_server: LocalS3,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    hadoop_aws = jars.fetch()
    root = upload(s3_server, Path(snapshots.uri), f"cluster-{uuid.uuid4().hex[:8]}")
    local_out, cluster_out = local_reports, tmp_path / "reports"

    code = package(tmp_path / "eddy-jobs.zip")
    python = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with StandaloneCluster(
        tmp_path / "spark", cores=2, memory="2g", env={**s3_server.env(), **python}
    ) as cluster:
        done = cluster.submit(
            REPOSITORY / "spark_jobs" / "__main__.py",
            ["--root", root, "--app", APP, "--out", str(cluster_out)],
            py_files=code,
            jars=hadoop_aws,
            # Kilobytes of state: a few tasks per stage, not Spark's default 200.
            conf={"spark.sql.shuffle.partitions": "4"},
            cwd=tmp_path,  # not the checkout: the code comes from the zip
        )
        assert done.returncode == 0, done.stdout + done.stderr[-8_000:]
        # Spark warns (at its default level) when a window has no partitioning and
        # moves all the data to one executor: no job may do that.
        assert "No Partition Defined for Window" not in done.stderr, done.stderr[-8_000:]
        # It ran on the cluster: its master lists the application as finished.
        finished = cluster.completed_apps()
        assert [a["name"] for a in finished] == ["eddy-sensor_report"], finished

    newest = snapshot_id_at(inputs.BASE + 60_000)
    for job in JOBS:
        local, remote = local_out / newest / job, cluster_out / newest / job
        assert f"s3a://{s3_server.bucket}/" in (remote / "report.md").read_text()
        assert report_without_location(remote / "report.md") == report_without_location(
            local / "report.md"
        ), job
        outputs = sorted(p.name for p in local.glob("*.parquet"))
        assert outputs, job
        assert sorted(p.name for p in remote.glob("*.parquet")) == outputs
        for name in outputs:
            assert rows(remote / name) == rows(local / name), f"{job}/{name}"
