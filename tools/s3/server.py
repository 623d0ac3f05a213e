"""Starting and stopping moto's S3 server as a child process.

:class:`LocalS3` is one server on a free port (a test's fixture holds one);
:func:`start`/:func:`stop`/:func:`status` keep one for the developer under
``$EDDY_HOME/s3`` (its pid and port in ``server.json``), as the local broker does.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from eddy.errors import EddyError
from eddy.paths import eddy_home
from tools.managed import Managed

BUCKET = "eddy"
HOST = "127.0.0.1"
# moto accepts any key; these only have to be present, for every client that signs.
ACCESS_KEY = "eddy-local"
SECRET_KEY = "eddy-local-secret"
REGION = "us-east-1"


class LocalS3Error(EddyError):
    """The local S3 server did not start: its log (named in the message) says why.
    ``moto[server]`` comes with the dev extra (``make venv``)."""


def client_env(endpoint: str) -> dict[str, str]:
    """The variables that point pyarrow (workers, ``eddy snapshot``) and hadoop-aws
    (Spark, through eddy.spark_jobs.objectstore) at ``endpoint``."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        # No instance-metadata lookups for credentials or region: there is no cloud here.
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


class LocalS3(Managed):
    """moto's S3 server on ``port`` (a free one if 0) with ``bucket`` created.

    Use as a context manager, or call :meth:`start` and :meth:`stop`; ``log``
    receives the server's request log.
    """

    def __init__(self, log: Path, port: int = 0, bucket: str = BUCKET) -> None:
        self.log = log
        self.port = port or _free_port()
        self.bucket = bucket
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def env(self) -> dict[str, str]:
        return client_env(self.endpoint)

    def uri(self, prefix: str) -> str:
        """``s3://<bucket>/<prefix>``: a root for EDDY_SNAPSHOT_ROOT."""
        return f"s3://{self.bucket}/{prefix.strip('/')}"

    def start(self, timeout_s: float = 30.0) -> LocalS3:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # Its own process group: a Ctrl-C meant for the caller's foreground
                # command does not stop a server that `tools s3 start` left running.
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise LocalS3Error(
                    f"moto's S3 server exited with {self.process.returncode}; see {self.log}"
                )
            try:
                httpx.get(f"{self.endpoint}/", timeout=1.0)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise LocalS3Error(
                        f"moto's S3 server did not answer on {self.endpoint} within "
                        f"{timeout_s:.0f} s; see {self.log}"
                    ) from None
                time.sleep(0.1)
        self._create_bucket()
        return self

    def _create_bucket(self) -> None:
        # The S3 API itself, as any client would; pyarrow refuses to create buckets
        # unless told to, and the product never should.
        import pyarrow.fs as pafs

        fs = pafs.S3FileSystem(
            endpoint_override=self.endpoint,
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            region=REGION,
            allow_bucket_creation=True,
        )
        fs.create_dir(self.bucket)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# -- the developer's server, kept across commands -------------------------------------


@dataclass(frozen=True)
class Layout:
    home: Path

    @property
    def state(self) -> Path:
        return self.home / "server.json"

    @property
    def log(self) -> Path:
        return self.home / "s3.log"


@dataclass(frozen=True)
class Status:
    running: bool
    pid: int | None
    endpoint: str | None
    bucket: str | None
    log: Path


def layout() -> Layout:
    """Under ``$EDDY_HOME/s3`` (service/paths.py), like the broker and PostgreSQL."""
    return Layout(eddy_home() / "s3")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process took the pid: not ours
        return False
    return True


def status(lay: Layout | None = None) -> Status:
    lay = lay or layout()
    try:
        state = json.loads(lay.state.read_text())
    except (OSError, ValueError):
        return Status(False, None, None, None, lay.log)
    pid = int(state["pid"])
    if not _alive(pid):
        return Status(False, None, None, None, lay.log)
    return Status(True, pid, str(state["endpoint"]), str(state["bucket"]), lay.log)


def start(port: int = 0, bucket: str = BUCKET, lay: Layout | None = None) -> Status:
    """Start the developer's server, unless it runs (then: that one, as it is)."""
    lay = lay or layout()
    current = status(lay)
    if current.running:
        return current
    server = LocalS3(lay.log, port=port, bucket=bucket).start()
    assert server.process is not None
    lay.home.mkdir(parents=True, exist_ok=True)
    state = {"pid": server.process.pid, "endpoint": server.endpoint, "bucket": bucket}
    lay.state.write_text(json.dumps(state) + "\n")
    return status(lay)


def stop(lay: Layout | None = None) -> int | None:
    """Stop the developer's server; the pid it had, or None if none ran."""
    lay = lay or layout()
    current = status(lay)
    lay.state.unlink(missing_ok=True)
    if not current.running or current.pid is None:
        return None
    os.kill(current.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while _alive(current.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(current.pid):
        os.kill(current.pid, signal.SIGKILL)
    return current.pid
