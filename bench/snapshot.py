"""Snapshot benchmark: export rate (rows/s) of 1M keys of window results to
Parquet, and the wall time of a Spark job (the sensor report) on them.

    python -m bench.snapshot [--keys 1000000] [--partitions 4]

Writes bench/results/snapshot.json. No Kafka: the state is written straight into
RocksDB with the pipelines' codecs, then snapshotted by the same code a worker
uses (checkpoint, export, publish).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench.machine import write_result
from eddy.eventtime import TimeWindow
from eddy.snapshot.layout import SnapshotRoot
from eddy.snapshot.offline import snapshot_stores
from eddy.tables.keyed import state_table
from eddy.tables.store import PartitionStore
from eddy.tables.windows import results_table

RESULTS = results_table("results")
RECENT = state_table("recent")
APP = "bench"
WINDOW_MS = 5_000
BASE_MS = 1_700_000_000_000


def fill(
    directory: Path, keys: int, partitions: int, windows_per_sensor: int
) -> dict[int, PartitionStore]:
    """``keys`` window results of ``keys / windows_per_sensor`` sensors, plus a few
    alerts, spread over ``partitions`` stores."""
    stores = {p: PartitionStore(directory / str(p)) for p in range(partitions)}
    sensors = keys // windows_per_sensor
    batch: dict[int, list[tuple[bytes, bytes | None]]] = {p: [] for p in stores}
    for s in range(sensors):
        sensor = f"sensor_{s}"
        p = s % partitions
        for w in range(windows_per_sensor):
            start = BASE_MS + w * WINDOW_MS
            value = {
                "sensor_id": sensor,
                "window_start_ms": start,
                "window_end_ms": start + WINDOW_MS,
                "count": 5,
                "avg": 40.0 + (s * 7 + w * 3) % 30 / 3,
                "min": 35.0,
                "max": 55.0,
                "timing": "on_time",
            }
            batch[p].append(
                (
                    RESULTS.full_key((sensor, TimeWindow(start, start + WINDOW_MS))),
                    orjson.dumps(value),
                )
            )
        if s % 10 == 0:
            alerts = [{"sensor_id": sensor, "kind": "freezing"}] * 3
            batch[p].append((RECENT.full_key(sensor), orjson.dumps(alerts)))
        if len(batch[p]) >= 50_000:
            stores[p].write(batch[p], None)
            batch[p] = []
    for p, records in batch.items():
        stores[p].write(records, None)
    return stores


def spark_job(root: SnapshotRoot, out: Path, master: str) -> dict[str, float]:
    from eddy.spark_jobs import sensor_report

    started = time.perf_counter()
    from eddy.spark_jobs.common import session

    spark = session("bench", master)
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.perf_counter() - started
    job_started = time.perf_counter()
    sensor_report.main(["--root", root.uri, "--app", APP, "--out", str(out), "--master", master])
    job_s = time.perf_counter() - job_started
    spark.stop()
    return {"spark_session_start_s": round(session_s, 2), "spark_job_s": round(job_s, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.snapshot", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--windows-per-sensor", type=int, default=500)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--output", default="bench/results/snapshot.json")
    args = parser.parse_args(argv)
    directory = Path(tempfile.mkdtemp(prefix="eddy-bench-snapshot-"))
    try:
        started = time.perf_counter()
        stores = fill(directory / "state", args.keys, args.partitions, args.windows_per_sensor)
        fill_s = time.perf_counter() - started
        root = SnapshotRoot.open(str(directory / "snapshots"))
        started = time.perf_counter()
        published = snapshot_stores(root, APP, {"sensor_averages": stores}, directory / "scratch")
        export_s = time.perf_counter() - started
        for store in stores.values():
            store.close()
        assert published.manifest is not None
        rows = int(published.manifest["rows"])
        parquet_bytes = sum(f.stat().st_size for f in (directory / "snapshots").rglob("*.parquet"))
        result: dict[str, Any] = {
            "what": "snapshot export of window results (checkpoint + Parquet + manifest), "
            "then the Spark sensor report on that snapshot",
            "keys": args.keys,
            "rows_exported": rows,
            "partitions": args.partitions,
            "fill_rocksdb_s": round(fill_s, 2),
            "export_s": round(export_s, 2),
            "export_rows_per_s": round(rows / export_s),
            "parquet_mb": round(parquet_bytes / 1e6, 1),
            "spark_master": args.master,
            **spark_job(root, directory / "reports", args.master),
        }
        write_result(args.output, result)
        print(
            f"snapshot export: {rows} rows in {export_s:.2f} s = {rows / export_s:,.0f} rows/s; "
            f"Spark sensor report on {args.keys:,} keys: {result['spark_job_s']} s "
            f"(+{result['spark_session_start_s']} s session start) -> {args.output}"
        )
        return 0
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
