"""The Spark jobs on snapshots of the reference agents' state for a fixed input, each
output compared with values computed independently from that input (inputs.py)."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eddy.snapshot.layout import SnapshotRoot, snapshot_id_at
from eddy.spark_jobs import hashtag_trends, sensor_report, snapshot_diff, vehicle_speed_report
from eddy.spark_jobs.common import Snapshot
from eddy.spark_jobs.ranking import with_rank
from tests.spark import inputs
from tests.spark.conftest import APP

pytestmark = pytest.mark.spark
HOUR_MS = inputs.HOUR_MS


def newest(root: SnapshotRoot) -> Snapshot:
    return Snapshot.open(root.uri, APP, snapshot_id_at(inputs.BASE))


def test_sensor_report(spark: SparkSession, snapshots: SnapshotRoot) -> None:
    snap = newest(snapshots)
    report = sensor_report.transform(
        snap.table(spark, "sensor_averages", "results"),
        snap.table(spark, "sensor_alerts", "state.counts"),
    )
    averages: dict[tuple[str, int], list[float]] = defaultdict(list)
    for (sensor, start), avg in inputs.window_averages().items():
        averages[(sensor, start // HOUR_MS * HOUR_MS)].append(avg)
    got = {(r["sensor_id"], r["hour_start_ms"]): r for r in report.hourly.collect()}
    assert set(got) == set(averages)
    for key, values in averages.items():
        row = got[key]
        assert row["windows"] == len(values)
        assert row["min_avg"] == pytest.approx(min(values))
        assert row["max_avg"] == pytest.approx(max(values))
        assert row["avg_avg"] == pytest.approx(statistics.fmean(values))
        assert row["stddev_avg"] == pytest.approx(statistics.stdev(values))

    # Every alert the agent raised, not only the 20 it keeps in its latest-alerts list.
    kinds = inputs.alerts()
    expected_kinds = {(s, k): n for s, found in kinds.items() for k, n in Counter(found).items()}
    assert {(r["sensor_id"], r["kind"]): r["alerts"] for r in report.alerts_by_kind.collect()} == (
        expected_kinds
    )
    assert ("s2", "threshold") in expected_kinds  # both kinds are exercised
    assert max(len(found) for found in kinds.values()) > 20  # more than the list keeps

    # Each sensor's readings, its closing reading included, since its first one.
    readings = Counter(r["sensor_id"] for r in inputs.readings())
    readings.update(inputs.SENSORS)
    rates = {s: len(kinds.get(s, [])) / readings[s] for s in inputs.SENSORS}
    expected_order = sorted(inputs.SENSORS, key=lambda s: (-rates[s], s))
    ranking = report.ranking.collect()
    assert [r["sensor_id"] for r in ranking] == expected_order
    assert [r["rank"] for r in ranking] == [1, 2, 3, 4]
    for row in ranking:
        assert row["readings"] == readings[row["sensor_id"]]
        assert row["alerts"] == len(kinds.get(row["sensor_id"], []))
        assert row["anomaly_rate"] == pytest.approx(rates[row["sensor_id"]])
        assert row["since_ms"] == inputs.BASE


def test_vehicle_speed_report(spark: SparkSession, snapshots: SnapshotRoot) -> None:
    snap = newest(snapshots)
    report = vehicle_speed_report.transform(snap.table(spark, "vehicle_speed", "results"))
    diffs = inputs.speed_diffs()
    got = {r["vehicle_id"]: r for r in report.distribution.collect()}
    assert set(got) == set(inputs.VEHICLES)
    agreement = {}
    for vehicle, rows in diffs.items():
        values = [d for _, d in rows]
        row = got[vehicle]
        agreement[vehicle] = sum(abs(d) <= 5.0 for d in values) / len(values)
        assert row["checks"] == len(values) == inputs.CHECK_SECONDS
        assert row["mean_diff_kmh"] == pytest.approx(statistics.fmean(values))
        assert row["stddev_diff_kmh"] == pytest.approx(statistics.stdev(values))
        assert row["p50_diff_kmh"] == pytest.approx(float(np.percentile(values, 50)))
        assert row["p90_diff_kmh"] == pytest.approx(float(np.percentile(values, 90)))
        assert (row["min_diff_kmh"], row["max_diff_kmh"]) == (min(values), max(values))
        assert row["agreement_rate"] == pytest.approx(agreement[vehicle])
    mean_abs = {v: statistics.fmean(abs(d) for _, d in rows) for v, rows in diffs.items()}
    expected_worst = sorted(inputs.VEHICLES, key=lambda v: (agreement[v], -mean_abs[v], v))
    assert [r["vehicle_id"] for r in report.worst.collect()] == expected_worst

    per_minute: dict[int, list[bool]] = defaultdict(list)
    for rows in diffs.values():
        for second_ms, d in rows:
            per_minute[second_ms // 60_000 * 60_000].append(abs(d) <= 5.0)
    over_time = {r["minute_start_ms"]: r for r in report.over_time.collect()}
    assert set(over_time) == set(per_minute)
    for minute, flags in per_minute.items():
        assert over_time[minute]["checks"] == len(flags)
        assert over_time[minute]["agreement_rate"] == pytest.approx(sum(flags) / len(flags))


def test_hashtag_trends(spark: SparkSession, snapshots: SnapshotRoot) -> None:
    snap = newest(snapshots)
    trends = hashtag_trends.transform(snap.table(spark, "hashtag_counts", "results"), top_n=3)
    mentions = inputs.hourly_mentions()
    hours = sorted({hour for _, hour in mentions})
    assert len(hours) == 3
    got = {(r["hashtag"], r["hour_start_ms"]): r for r in trends.hourly.collect()}
    assert {k: r["mentions"] for k, r in got.items()} == mentions
    for (tag, hour), n in mentions.items():
        before = mentions.get((tag, hour - HOUR_MS))
        assert got[(tag, hour)]["previous_mentions"] == before
        assert got[(tag, hour)]["growth"] == n - (before or 0)
        if before:
            assert got[(tag, hour)]["growth_rate"] == pytest.approx((n - before) / before)
    top = trends.top.collect()
    for hour in hours:
        ranked = sorted(((-n, tag) for (tag, h), n in mentions.items() if h == hour))[:3]
        assert [(r["hashtag"], r["rank"]) for r in top if r["hour_start_ms"] == hour] == [
            (tag, rank) for rank, (_, tag) in enumerate(ranked, start=1)
        ]


def test_snapshot_diff(spark: SparkSession, snapshots: SnapshotRoot) -> None:
    old = Snapshot.open(snapshots.uri, APP, snapshot_id_at(inputs.BASE))
    new = Snapshot.open(snapshots.uri, APP, snapshot_id_at(inputs.BASE + 60_000))
    diff = snapshot_diff.transform(old.everything(spark), new.everything(spark))
    changes = diff.changes.where("pipeline = 'sensor_averages' and table = 'results'").collect()
    # The second input has 30 s more readings: their windows are added, and nothing
    # else of sensor_averages' results changes.
    added = {(r["key"], r["window_start_ms"]) for r in changes if r["change"] == "added"}
    expected = {
        (r["sensor_id"], r["timestamp_ms"] // 5_000 * 5_000)
        for r in inputs.readings(changed=True)
        if r["timestamp_ms"] >= inputs.BASE + inputs.READINGS_FOR_MS
    }
    assert added == expected
    assert {r["change"] for r in changes} == {"added"}
    summary = {(r["pipeline"], r["table"], r["change"]): r["keys"] for r in diff.summary.collect()}
    assert summary[("sensor_averages", "results", "added")] == len(expected)
    assert ("vehicle_speed", "results", "changed") not in summary  # the same vehicle input
    same = snapshot_diff.transform(old.everything(spark), old.everything(spark))
    assert same.changes.count() == 0


def test_every_job_runs_end_to_end_and_writes_its_report(local_reports: Path) -> None:
    newest_id = snapshot_id_at(inputs.BASE + 60_000)
    for job in ("sensor_report", "vehicle_speed_report", "hashtag_trends", "snapshot_diff"):
        directory = local_reports / newest_id / job
        report = (directory / "report.md").read_text()
        assert newest_id in report
        pngs = list(directory.glob("*.png"))
        assert pngs
        assert pngs[0].read_bytes()[:4] == b"\x89PNG"
        assert any(directory.glob("*.parquet"))


def test_ranks_run_one_to_n_over_many_partitions_without_a_global_window(
    spark: SparkSession,
) -> None:
    # Spark's warning "No Partition Defined for Window operation! Moving all data to a
    # single partition" comes from a Window operator without partitions; with_rank has
    # none, and still numbers rows spread over several sorted partitions.
    values = [(n, (n * 7_919) % 1_000 / 10) for n in range(1_000)]
    frame = spark.createDataFrame(values, ["id", "score"]).repartition(7)
    # Five sorted partitions, not merged into one by adaptive execution.
    spread = {
        "spark.sql.shuffle.partitions": "5",
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
    }
    saved = {k: spark.conf.get(k) for k in spread}
    for key, value in spread.items():
        spark.conf.set(key, value)
    try:
        ranked = with_rank(frame, F.desc("score"), F.asc("id"))
        assert "Window" not in ranked._jdf.queryExecution().executedPlan().toString()
        rows = ranked.orderBy("rank").collect()
        sorted_parts = frame.orderBy("score").select(F.spark_partition_id()).distinct().count()
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)
    assert sorted_parts == 5
    expected = sorted(values, key=lambda v: (-v[1], v[0]))
    assert [(r["id"], r["score"]) for r in rows] == expected
    assert [r["rank"] for r in rows] == list(range(1, 1_001))
