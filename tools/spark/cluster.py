"""A Spark standalone cluster from pyspark's own distribution: one master and one
worker (``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``)
on free local ports, and ``spark-submit`` against it.

What a real cluster changes is only where the processes run; the master URL,
``--py-files`` and the jars are passed the same way (docs/snapshots.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from eddy.errors import EddyError
from eddy.paths import eddy_home
from tools.managed import Managed
from tools.spark.jars import spark_home

HOST = "127.0.0.1"
# What the jobs import (eddy.spark_jobs needs eddy's snapshot layout and eddy.tables'
# schema): each folder, and where it sits in the package.
PACKAGES = {"service": "eddy", "spark_jobs": "eddy/spark_jobs", "tables": "eddy/tables"}
REPOSITORY = Path(__file__).resolve().parents[2]


class SparkClusterError(EddyError):
    """The standalone cluster did not come up: the master's and worker's logs (named
    in the message) say why. It needs Java 17 and pyspark (the spark extra)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def package(destination: Path) -> Path:
    """A zip of the jobs' code for ``spark-submit --py-files``: what a driver or an
    executor on another machine imports, without a checkout there."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    temporary = destination.with_name(f"{destination.name}.tmp-{os.getpid()}")
    with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
        for folder, inside in PACKAGES.items():
            for path in sorted((REPOSITORY / folder).rglob("*.py")):
                archive.write(path, f"{inside}/{path.relative_to(REPOSITORY / folder).as_posix()}")
    temporary.replace(destination)
    return destination


class StandaloneCluster(Managed):
    """A master and a worker with ``cores`` and ``memory`` (``"1g"``), logging and
    working under ``directory``; ``env`` is added to both processes' environment
    (executors inherit the worker's: credentials for an object store go there).
    """

    def __init__(
        self,
        directory: Path,
        cores: int = 2,
        memory: str = "2g",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.directory = directory
        self.cores = cores
        self.memory = memory
        self.env = {**os.environ, **(env or {}), "SPARK_LOCAL_IP": HOST}
        self.port = _free_port()
        self.ui_port = _free_port()
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{HOST}:{self.ui_port}"

    def _launch(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        self.directory.mkdir(parents=True, exist_ok=True)
        spark_class = spark_home() / "bin" / "spark-class"
        with (self.directory / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(
                [str(spark_class), *args],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # stopped as a group: spark-class execs java
            )
        self.processes.append(process)
        return process

    def start(self, timeout_s: float = 90.0) -> StandaloneCluster:
        self._launch(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", HOST, "--port", str(self.port), "--webui-port", str(self.ui_port)),
        )
        self._launch(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.master_url,
            *("--host", HOST, "--webui-port", str(_free_port())),
            *("--cores", str(self.cores), "--memory", self.memory),
            *("--work-dir", str(self.directory / "work")),
        )
        deadline = time.monotonic() + timeout_s
        while self.alive_workers() < 1:
            failed = [p for p in self.processes if p.poll() is not None]
            if failed or time.monotonic() > deadline:
                self.stop()
                why = "exited" if failed else f"had no worker after {timeout_s:.0f} s"
                raise SparkClusterError(
                    f"the standalone cluster {why}; see {self.directory}/master.log and worker.log"
                )
            time.sleep(0.5)
        return self

    def _master_state(self) -> dict[str, Any]:
        """What the master's web UI shows, as JSON (empty while it does not answer)."""
        try:
            state: dict[str, Any] = httpx.get(f"{self.ui_url}/json/", timeout=2.0).json()
        except (httpx.HTTPError, ValueError):
            return {}
        return state

    def alive_workers(self) -> int:
        return int(self._master_state().get("aliveworkers", 0))

    def completed_apps(self) -> list[dict[str, Any]]:
        """Applications that ran here and finished (name, cores, duration...)."""
        return list(self._master_state().get("completedapps", []))

    def submit(
        self,
        script: Path,
        args: Sequence[str],
        *,
        py_files: Path,
        jars: Sequence[Path] = (),
        conf: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        timeout_s: float = 300.0,
    ) -> subprocess.CompletedProcess[str]:
        """``spark-submit --master spark://... --py-files <zip> <script> <args>``."""
        command = [str(spark_home() / "bin" / "spark-submit"), "--master", self.master_url]
        command += ["--py-files", str(py_files)]
        if jars:
            command += ["--jars", ",".join(str(j) for j in jars)]
        # Small executors: the cluster is one laptop-sized worker.
        command += ["--executor-memory", "1g", "--conf", "spark.ui.enabled=false"]
        for key, value in (conf or {}).items():
            command += ["--conf", f"{key}={value}"]
        command += [str(script), *args]
        return subprocess.run(
            command,
            env={**self.env, **(env or {})},
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )

    def stop(self) -> None:
        for process in reversed(self.processes):  # the worker first
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()


# -- the developer's cluster, kept across commands --------------------------------------


def state_dir() -> Path:
    return eddy_home() / "spark" / "cluster"


@dataclass(frozen=True)
class Status:
    running: bool
    master_url: str | None
    ui_url: str | None
    pids: list[int]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def status() -> Status:
    try:
        state = json.loads((state_dir() / "cluster.json").read_text())
    except (OSError, ValueError):
        return Status(False, None, None, [])
    pids = [int(p) for p in state["pids"]]
    if not all(_alive(p) for p in pids):
        return Status(False, None, None, [p for p in pids if _alive(p)])
    return Status(True, str(state["master_url"]), str(state["ui_url"]), pids)


def start_background() -> Status:
    """Start the developer's cluster, unless one runs."""
    current = status()
    if current.running:
        return current
    stop_background()  # half of a previous one
    cluster = StandaloneCluster(state_dir()).start()
    state = {
        "master_url": cluster.master_url,
        "ui_url": cluster.ui_url,
        "pids": [p.pid for p in cluster.processes],
    }
    (state_dir() / "cluster.json").write_text(json.dumps(state) + "\n")
    return status()


def stop_background() -> list[int]:
    """Stop the developer's cluster; the pids it stopped."""
    current = status()
    (state_dir() / "cluster.json").unlink(missing_ok=True)
    for pid in current.pids:  # each leads its own process group (start_new_session)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    return current.pids
