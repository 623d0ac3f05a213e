"""One local[1] Spark session for every Spark test, and a snapshot produced from a
fixed input by the real pipelines (replayed without Kafka, as in docs/replay.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from service.replay_pipeline import PipelineReplay, PipelineReplaySpec
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
    replays: list[PipelineReplay] = []
    try:
        for group in PIPELINES:
            spec = PipelineReplaySpec(kind="pipeline", pipelines=list(group))
            replay = PipelineReplay(spec, directory / "state")
            replays.append(replay)
            mine = [
                line
                for line in lines
                if line.get("topic", "") in replay.topics or "topic" not in line
            ]
            for _ in replay.feed(iter(mine)):
                pass  # the outputs are not what this fixture is after: the state is
        stores = {name: {0: store} for r in replays for name, store in r.stores().items()}
        snapshot_stores(root, APP, stores, directory / "scratch", snapshot_id=snapshot_id)
    finally:
        for replay in replays:
            replay.close()


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
