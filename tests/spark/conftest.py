"""One local[1] Spark session for every Spark test, and a snapshot produced from a
fixed input by the real pipelines (replayed without Kafka, as in docs/replay.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from service.replay_pipeline import PipelineReplaySpec, _Collector, _inputs, _run, _Stage
from service.settings import load_settings
from service.snapshot.layout import SnapshotRoot, snapshot_id_at
from service.snapshot.offline import snapshot_stores
from tests.spark import inputs

APP = "spark-test"
PIPELINES = [
    ("sensor_averages",),
    ("sensor_alerts",),
    ("vehicle_speed",),
    ("hashtags", "hashtag_counts"),
]


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
    """Replay ``lines`` through the pipelines, then snapshot their state. A replay
    feeds a topic to one stage, so pipelines reading the same topic (the sensor
    ones) replay separately."""
    stages: list[_Stage] = []
    try:
        for group in PIPELINES:
            spec = PipelineReplaySpec(kind="pipeline", pipelines=list(group))
            group_stages = [_Stage(p, directory / "state") for p in spec.build()]
            stages += group_stages
            topics = {t for stage in group_stages for t in _inputs(stage)}
            mine = [
                line for line in lines if line.get("topic", "") in topics or "topic" not in line
            ]
            for _ in _run(group_stages, iter(mine), _Collector(load_settings().dead_letter_topic)):
                pass  # the outputs are not what this fixture is after: the state is
        stores = {stage.pipeline.name: {0: stage.store} for stage in stages}
        snapshot_stores(root, APP, stores, directory / "scratch", snapshot_id=snapshot_id)
    finally:
        for stage in stages:
            stage.close()


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
