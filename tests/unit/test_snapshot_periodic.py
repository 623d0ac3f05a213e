"""Periodic snapshots and the commit-boundary cut, with a fake runtime (no broker)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import TopicPartition

from eddy.eventtime import SystemClock
from eddy.pipeline.windowed import WINDOW_STATES
from eddy.runtime.progress import InputProgress
from eddy.snapshot.layout import ID_PATTERN, SnapshotRoot, time_of
from eddy.snapshot.take import Snapshotter
from tests.support.kafka import unique_settings
from tests.unit.test_snapshot_export import store_with_rows


@dataclass
class FakeLogic:
    watermark_ms: int = 4_999


@dataclass
class FakeTask:
    store: Any
    committed_offsets: dict[TopicPartition, int]
    logic: FakeLogic = field(default_factory=FakeLogic)


class FakeRuntime:
    """What a snapshot needs of a PipelineRuntime: its tasks at a commit boundary."""

    name = "sensor_averages"
    partition_count = 2
    endpoint = "http://me"

    def __init__(self, tasks: dict[int, FakeTask]) -> None:
        self.tasks = tasks
        self.boundaries = 0

    async def at_commit_boundary(self, action: Callable[[Mapping[int, Any]], Any]) -> Any:
        self.boundaries += 1
        return action(self.tasks)

    def owner_of(self, partition: int) -> str:
        return self.endpoint

    async def inputs(self, partition: int) -> list[InputProgress]:
        return [InputProgress("readings", 7 + partition, end_offset=9, lag=2 - partition)]

    @property
    def pipeline(self) -> Any:
        return SimpleNamespace(state_schemas=WINDOW_STATES)


async def test_every_interval_all_partitions_are_cut_and_published(tmp_path: Path) -> None:
    settings = unique_settings(
        tmp_path, snapshot_root=str(tmp_path / "snap"), snapshot_interval_ms=300
    )
    tasks = {
        p: FakeTask(store_with_rows(tmp_path / f"db{p}"), {TopicPartition("readings", p): 7 + p})
        for p in range(2)
    }
    runtime = FakeRuntime(tasks)
    snapshotter = Snapshotter(settings, lambda: {"sensor_averages": runtime}, SystemClock())  # type: ignore[dict-item]
    periodic = asyncio.create_task(snapshotter.run_periodic())
    root = SnapshotRoot.open(settings.snapshot_root)
    try:
        for _ in range(100):
            await asyncio.sleep(0.1)
            if len(root.manifests(settings.app_id)) >= 2:
                break
    finally:
        periodic.cancel()
        # A snapshot may be under way: its clean-up runs as the task unwinds.
        with contextlib.suppress(asyncio.CancelledError):
            await periodic
    manifests = root.manifests(settings.app_id)
    assert len(manifests) >= 2
    for manifest in manifests:
        assert ID_PATTERN.match(manifest["snapshot_id"])
        assert time_of(manifest["snapshot_id"]) % 300 == 0  # the slot: the same on every worker
        assert [p["committed_offsets"] for p in manifest["parts"]] == [
            {"readings": 7},
            {"readings": 8},
        ]
        assert {p["watermark_ms"] for p in manifest["parts"]} == {4_999}
        assert manifest["parts"][0]["tables"]["results"]["rows"] == 12
        # What a resume from it needs: value versions, and whether input was left.
        assert manifest["parts"][0]["table_versions"]["results"] == 1
        assert [p["end_offsets"] for p in manifest["parts"]] == [{"readings": 9}, {"readings": 9}]
    assert runtime.boundaries >= 2
    # The checkpoints are scratch: gone once exported.
    assert not any((tmp_path / "state").rglob("CURRENT"))
    for task in tasks.values():
        task.store.close()


async def test_a_snapshot_cancelled_while_it_cleans_up_still_removes_its_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker stopping cancels the snapshot under way; if the cancel lands while
    # the cut is being removed, the cut's hard links must not stay on disk.
    settings = unique_settings(tmp_path, snapshot_root=str(tmp_path / "snap"))
    store = store_with_rows(tmp_path / "db0")
    runtime = FakeRuntime({0: FakeTask(store, {TopicPartition("readings", 0): 7})})
    snapshotter = Snapshotter(settings, lambda: {"sensor_averages": runtime}, SystemClock())  # type: ignore[dict-item]
    removing = threading.Event()
    real_rmtree = shutil.rmtree

    def slow_rmtree(path: Path, ignore_errors: bool = False) -> None:
        if threading.current_thread() is not threading.main_thread():
            removing.set()
            time.sleep(0.3)
        real_rmtree(path, ignore_errors)

    monkeypatch.setattr("eddy.snapshot.take.shutil.rmtree", slow_rmtree)
    taking = asyncio.create_task(snapshotter.take("20261127T000000000Z"))
    assert await asyncio.to_thread(removing.wait, 10)
    taking.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await taking
    assert not any((tmp_path / "state").rglob("CURRENT"))
    store.close()


async def test_cuts_a_killed_worker_left_are_discarded(tmp_path: Path) -> None:
    settings = unique_settings(tmp_path, snapshot_root=str(tmp_path / "snap"))
    snapshotter = Snapshotter(settings, dict, SystemClock())
    leftover = Path(settings.state_dir) / settings.app_id / ".snapshots" / "x" / "CURRENT"
    leftover.parent.mkdir(parents=True)
    leftover.write_text("MANIFEST-000005\n")
    await snapshotter.discard_leftovers()
    assert not leftover.exists()
