"""One local[1] Spark session for every Spark test, and a snapshot produced from a
fixed input by the reference app's real agents (run without Kafka by the test
driver, eddy.testing)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from eddy import examples
from eddy.snapshot.layout import SnapshotRoot, snapshot_id_at
from eddy.snapshot.offline import snapshot_stores
from eddy.testing import TestDriver
from tests.spark import inputs

APP = "spark-test"
AGENTS = ["sensor_averages", "sensor_alerts", "vehicle_speed", "hashtag_counts"]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = (
        SparkSession.builder.master("local[1]")
        .appName("eddy-tests")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def replay_into_snapshot(
    root: SnapshotRoot, directory: Path, lines: list[dict[str, Any]], snapshot_id: str
) -> None:
    """Feed ``lines`` to the agents, then snapshot their state. Each line is a record
    of a topic, or a processing time that every stage gets as a tick."""
    with TestDriver(examples.app, agents=AGENTS) as driver:
        for line in lines:
            if "processing_time" in line:
                driver.set_time(int(line["processing_time"]))
            else:
                driver.send(line["topic"], line["record"])
        # The outputs are not what this fixture is after: the state is.
        stores = {name: {0: store} for name, store in driver.stores().items()}
        snapshot_stores(root, APP, stores, directory / "scratch", snapshot_id=snapshot_id)


@pytest.fixture(scope="session")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> SnapshotRoot:
    """Two snapshots: the fixed input, then the same input with a few changes."""
    directory = tmp_path_factory.mktemp("snapshots")
    root = SnapshotRoot.open(str(directory / "root"))
    replay_into_snapshot(root, directory / "a", inputs.lines(), snapshot_id_at(inputs.BASE))
    replay_into_snapshot(
        root, directory / "b", inputs.lines(changed=True), snapshot_id_at(inputs.BASE + 60_000)
    )
    return root


@pytest.fixture(scope="session")
def local_reports(
    spark: SparkSession, snapshots: SnapshotRoot, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """Every job run once in local mode on ``snapshots`` (``python -m eddy.spark_jobs``,
    in this process's session): the reports' folder, ``<out>/<snapshot id>/<job>/``."""
    from eddy.spark_jobs.__main__ import main

    out = tmp_path_factory.mktemp("local-reports")
    assert main(["--root", snapshots.uri, "--app", APP, "--out", str(out)]) == 0
    return out
