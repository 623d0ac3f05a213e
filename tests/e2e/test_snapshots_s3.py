"""Snapshots on a real S3-compatible server (moto's, tools/s3), as a worker writes
them and as the CLI and Spark read them.

A worker (``python -m eddy worker``) with ``EDDY_SNAPSHOT_ROOT=s3://...`` takes
one snapshot on demand (``eddy snapshot create``) and others every
``EDDY_SNAPSHOT_INTERVAL_MS``. Then a periodic one is stopped half-way: a proxy
between the worker and the server holds the upload of one partition's part
manifest, after others were written, and the worker is killed with SIGKILL there.
``eddy snapshot list`` and the Spark jobs' newest-snapshot lookup must not see it;
the sensor report, run through ``s3a://`` with hadoop-aws as the CronJob runs it,
reads the newest complete one and says what the worker's state said.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from eddy.settings import Settings
from eddy.snapshot.layout import MANIFEST, PARTS, time_of
from eddy.spark_jobs.common import Snapshot
from tests.support.kafka import HOUR_AGO_MS, create_topics, produce, unique_settings
from tests.support.processes import WorkerProcess, settings_env
from tests.support.s3 import HoldingProxy, s3_filesystem, s3_server  # noqa: F401 (fixture)
from tools.s3 import LocalS3
from tools.spark import jars

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

SENSORS = [f"s{n}" for n in range(6)]
READINGS = 300  # per sensor, 100 ms apart
INTERVAL_MS = 3_000
REPOSITORY = Path(__file__).resolve().parents[2]


def temperature(sensor: int, n: int) -> float:
    return 20.0 + (n * (sensor + 5)) % 30  # below 32 F now and then: freezing alerts


def readings() -> list[tuple[bytes, bytes]]:
    rows = []
    for n in range(READINGS):
        for s, sensor in enumerate(SENSORS):
            body = {
                "sensor_id": sensor,
                "timestamp_ms": HOUR_AGO_MS + n * 100,
                "temperature": temperature(s, n),
            }
            rows.append((sensor.encode(), orjson.dumps(body)))
    # A minute later: the watermark closes every 5 s window of the readings before.
    for sensor in SENSORS:
        body = {"sensor_id": sensor, "timestamp_ms": HOUR_AGO_MS + 60_000, "temperature": 50.0}
        rows.append((sensor.encode(), orjson.dumps(body)))
    return rows


@pytest.fixture
def proxy(s3_server: LocalS3) -> Iterator[HoldingProxy]:  # noqa: F811 (the fixture)
    holding = HoldingProxy(s3_server.port).start()
    yield holding
    holding.stop()


def eddy(settings: Settings, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eddy", *args],
        env=settings_env(settings, **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def listed(settings: Settings, env: dict[str, str]) -> list[str]:
    done = eddy(settings, env, "snapshot", "list", "--json")
    assert done.returncode == 0, done.stderr
    return [s["id"] for s in json.loads(done.stdout)]


def snapshot_dirs(fs: pafs.FileSystem, app_dir: str) -> dict[str, set[str]]:
    """Every snapshot folder on the server, with the names of what it holds."""
    found: dict[str, set[str]] = {}
    for info in fs.get_file_info(pafs.FileSelector(app_dir, recursive=True)):
        if info.type == pafs.FileType.File:
            relative = info.path.removeprefix(f"{app_dir}/")
            snapshot_id, _, rest = relative.partition("/")
            found.setdefault(snapshot_id, set()).add(rest)
    return found


def counts_state(worker: WorkerProcess) -> dict[str, dict[str, Any]]:
    answers = {s: worker.get(f"/agents/sensor_alerts/state/counts/{s}") for s in SENSORS}
    return {s: a.json()["value"] for s, a in answers.items() if a.status_code == 200}


def settled_counts(worker: WorkerProcess, quiet_s: float = 2.5) -> dict[str, dict[str, Any]]:
    """The counts once every sensor's last "rising" alert fired and they stopped
    changing. Each sensor's closing reading (50 F) is above the one before, so a
    processing-time timer raises one more alert 1 s after it was processed; a
    loaded machine commits it late, and the snapshot read later must agree."""
    deadline = time.monotonic() + 60
    state: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        now = counts_state(worker)
        rose = len(now) == len(SENSORS) and all(c["alerts"].get("rising") for c in now.values())
        if rose and now == state:
            return state
        state = now
        time.sleep(quiet_s if rose else 0.3)
    raise AssertionError(f"the alert counts did not settle: {state}\n{worker.log()}")


async def test_snapshots_on_s3_are_whole_or_invisible(
    s3_server: LocalS3,  # noqa: F811 (the fixture)
    proxy: HoldingProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in s3_server.env().items():  # this process reads the store too
        monkeypatch.setenv(name, value)
    hadoop_aws = jars.fetch()  # before the worker starts: Maven's time is not the test's
    settings = unique_settings(tmp_path, agents=("sensor_averages", "sensor_alerts"))
    root = s3_server.uri(settings.app_id)
    direct = {**s3_server.env(), "EDDY_SNAPSHOT_ROOT": root}
    await create_topics(settings)
    await produce(settings, settings.topic("sensor-readings"), readings())

    scenario(s3_server, proxy, settings, direct, hadoop_aws, tmp_path)


def scenario(
    s3_server: LocalS3,  # noqa: F811 (the fixture)
    proxy: HoldingProxy,
    settings: Settings,
    direct: dict[str, str],
    hadoop_aws: list[Path],
    tmp_path: Path,
) -> None:
    root = direct["EDDY_SNAPSHOT_ROOT"]
    through_proxy = {**direct, "AWS_ENDPOINT_URL": proxy.endpoint}
    worker = WorkerProcess(
        settings,
        tmp_path / "worker.log",
        **through_proxy,
        EDDY_SNAPSHOT_INTERVAL_MS=str(INTERVAL_MS),
    )
    try:
        worker.wait_ready()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with_counts = counts_state(worker)
            if [c["readings"] for c in with_counts.values()] == [READINGS + 1] * len(SENSORS):
                break
            time.sleep(0.3)
        else:
            raise AssertionError(f"not every reading was counted:\n{worker.log()}")
        state = settled_counts(worker)
        freezing = {
            sensor: sum(temperature(s, n) < 32.0 for n in range(READINGS))
            for s, sensor in enumerate(SENSORS)
        }
        assert {s: c["alerts"].get("freezing", 0) for s, c in state.items()} == freezing

        # On demand: the command a user types, answered once every part is published.
        created = eddy(settings, direct, "snapshot", "create", "--url", worker.base)
        assert created.returncode == 0, created.stdout + created.stderr
        # Where it is, as Spark names it (s3a://).
        assert f"at s3a://{s3_server.bucket}/{settings.app_id}/" in created.stdout
        on_demand = created.stdout.split()[1].rstrip(":")

        # Periodic: one at a multiple of the interval, besides the one asked for.
        deadline = time.monotonic() + 30
        while not [i for i in listed(settings, direct) if i != on_demand]:
            assert time.monotonic() < deadline, worker.log()
            time.sleep(0.5)
        periodic = [i for i in listed(settings, direct) if i != on_demand]
        assert all(time_of(i) % INTERVAL_MS == 0 for i in periodic)

        # The next periodic snapshot: two part manifests go through, the third is held.
        proxy.arm(after=2)
        assert proxy.held.wait(INTERVAL_MS / 1000 + 30), worker.log()
        worker.stop(signal.SIGKILL)
    finally:
        worker.stop(signal.SIGKILL)

    fs = s3_filesystem(s3_server)
    # <root>/<app>/<snapshot id>/..., the root being s3://<bucket>/<app id>
    folders = snapshot_dirs(fs, f"{s3_server.bucket}/{settings.app_id}/{settings.app_id}")
    partial = [i for i, names in folders.items() if MANIFEST not in names]
    assert len(partial) == 1, folders
    parts_written = [n for n in folders[partial[0]] if n.startswith(f"{PARTS}/")]
    assert len(parts_written) == 2, folders  # half-way: some partitions' parts, never the manifest

    complete = listed(settings, direct)
    assert partial[0] not in complete
    assert complete == sorted(i for i, names in folders.items() if MANIFEST in names)
    assert on_demand in complete
    newest = Snapshot.open(root, settings.app_id)  # the jobs' lookup (pyarrow)
    assert newest.snapshot_id == complete[-1] < partial[0]
    assert newest.location.startswith(f"s3a://{s3_server.bucket}/")

    # The sensor report through s3a://, hadoop-aws on the classpath as --jars.
    out = tmp_path / "reports"
    spark_env = {
        **settings_env(settings, **direct),
        "PYSPARK_SUBMIT_ARGS": f"--jars {','.join(map(str, hadoop_aws))} pyspark-shell",
        "PYSPARK_PYTHON": sys.executable,
    }
    job = subprocess.run(
        [
            sys.executable,
            "-m",
            "eddy.spark_jobs.sensor_report",
            "--out",
            str(out),
            "--master",
            "local[2]",
        ],
        env=spark_env,
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert job.returncode == 0, job.stdout + job.stderr[-5_000:]
    report = out / newest.snapshot_id / "sensor_report"
    assert f"Snapshot `{newest.snapshot_id}`" in (report / "report.md").read_text()
    ranking = pq.read_table(report / "ranking.parquet").to_pylist()
    assert {r["sensor_id"]: r["readings"] for r in ranking} == dict.fromkeys(SENSORS, READINGS + 1)
    assert {r["sensor_id"]: r["alerts"] for r in ranking} == {
        s: sum(c["alerts"].values()) for s, c in state.items()
    }
    assert [r["rank"] for r in ranking] == list(range(1, len(SENSORS) + 1))
    assert (report / "anomaly_rate.png").read_bytes()[:4] == b"\x89PNG"
