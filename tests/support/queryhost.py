"""Ingest processes' stores and reports written by hand, for the query process
without a broker (tests/unit/test_query_plane.py, tests/unit/test_fastpath.py,
bench/querycost.py): real RocksDB stores as an ingest process writes them and the
reports it publishes."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from eddy import examples
from eddy.api.app import create_app
from eddy.app.queries import partition_for
from eddy.eventtime import SystemClock, TimeWindow
from eddy.pipeline.windowed import RESULTS
from eddy.plane.backend import QueryPlane
from eddy.plane.stages import Secondaries
from eddy.plane.status import ReportFile
from eddy.plane.supervisor import Child
from eddy.settings import Settings, build
from eddy.tables.store import PartitionStore
from tests.support.kafka import TEST_AGENT_SETTINGS

PARTITIONS = 6
ME = "http://me:8000"
PEER = "http://peer:8000"
STAGE = "sensor_averages"


def sensor_in(partition: int) -> str:
    return next(f"s{i}" for i in range(1_000) if partition_for(f"s{i}", PARTITIONS) == partition)


def average(sensor: str, start_ms: int, count: int = 4) -> dict[str, Any]:
    return {
        "sensor_id": sensor,
        "window_start_ms": start_ms,
        "window_end_ms": start_ms + 5_000,
        "count": count,
        "avg": 70.0,
        "min": 69.0,
        "max": 71.0,
        "timing": "first",
    }


def commit(store: PartitionStore, sensor: str, starts: list[int], offset: int) -> None:
    """One checkpoint, as an ingest process writes it after the Kafka commit."""
    txn = store.begin()
    for start in starts:
        txn.put(RESULTS, (sensor, TimeWindow(start, start + 5_000)), average(sensor, start))
    txn.commit(txn.changelog_records(), offset)


@dataclass
class FakeProcess:
    pid: int
    returncode: int | None = None


class Host:
    """Two ingest processes' reports and stores, written by hand."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.status = root / "status"
        self.status.mkdir(parents=True)
        self.children = [
            Child(i, ReportFile(self.status / f"{i}.json"), self.status / f"{i}.prom")
            for i in range(2)
        ]
        for i, child in enumerate(self.children):
            child.process = FakeProcess(1_000 + i)  # type: ignore[assignment]
        self.stores: dict[int, PartitionStore] = {}
        # Process 0 serves 0-2, process 1 serves 3 and restores 4; 5 is the peer's.
        self.owned = {0: [0, 1, 2], 1: [3, 4]}
        self.restoring = {4}
        self.epochs: dict[int, int] = {}
        self.offsets: dict[int, int] = {}  # input offsets reported, by partition
        for partition in (0, 1, 2, 3):
            self.stores[partition] = PartitionStore(root / "state" / str(partition))
        self.ready = True

    def path(self, partition: int) -> str:
        return str(self.root / "state" / str(partition))

    def publish(self) -> None:
        owners = {str(p): ME for p in range(5)} | {"5": PEER}
        for index, partitions in self.owned.items():
            report = {
                "pid": 1_000 + index,
                "worker_id": f"w-p{index}",
                "control_url": None,
                "started": True,
                "ready": self.ready and not (set(partitions) & self.restoring),
                "live": True,
                "written_ms": int(time.time() * 1000),
                "stages": {
                    STAGE: {
                        "agent": STAGE,
                        "partition_count": PARTITIONS,
                        "assigned_once": True,
                        "ready": not (set(partitions) & self.restoring),
                        "partitions": {str(p): self._partition(p) for p in partitions},
                        "owners": owners,
                        "counters": {"records_in": 10.0 * (index + 1), "commits": 2.0},
                    }
                },
            }
            scratch = self.status / f".{index}.json.tmp"
            scratch.write_bytes(orjson.dumps(report))
            os.replace(scratch, self.status / f"{index}.json")

    def _partition(self, partition: int) -> dict[str, Any]:
        if partition in self.restoring:
            return {"state": "restoring", "epoch": 0, "path": "", "watermark_ms": None,
                    "committed_offsets": {}}  # fmt: skip
        return {
            "state": "running",
            "epoch": self.epochs.get(partition, 1),
            "path": self.path(partition),
            "watermark_ms": 9_999,
            "committed_offsets": {"sensor-readings": self.offsets.get(partition, 7 + partition)},
        }

    def close(self) -> None:
        for store in self.stores.values():
            store.close()


def query_plane(host: Host, root: Path, secondaries: Secondaries | None = None) -> QueryPlane:
    """The query process's backend over ``host``, with the default app's agents."""
    settings = build(Settings, {"topic_prefix": "", "worker_id": "w", "state_dir": root})
    built = examples.app.build(settings, [*examples.app.default_agents], TEST_AGENT_SETTINGS)
    found = secondaries or Secondaries(root / "secondary")
    return QueryPlane(settings, built, SystemClock(), lambda: host.children, found, lambda: ME)


def query_api(plane: QueryPlane, token: str | None = None, fast: bool = True) -> Any:
    """The worker's API over ``plane``, as ``eddy worker`` builds it (``fast``: with
    the fast path of point queries)."""
    return create_app(
        plane, token, plane.observe_request, app=examples.app, fast_point_queries=fast
    )
