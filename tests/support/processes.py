"""Worker processes for end-to-end tests: `python -m eddy worker`, as users run it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from eddy.settings import Settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def settings_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    env.update(settings.to_env())
    env.update(extra)
    return env


def agent_env(**fields: object) -> dict[str, str]:
    """Agent settings (agents/settings.py) as a worker process reads them:
    ``agent_env(window_size_ms=5_000)`` -> ``{"EDDY_WINDOW_SIZE_MS": "5000"}``."""
    return {f"EDDY_{name.upper()}": str(value) for name, value in fields.items()}


class WorkerProcess:
    def __init__(self, settings: Settings, log_path: Path, *args: str, **env: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        worker_env = settings_env(settings, EDDY_API_PORT=str(self.port), **env)
        self._log = log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "eddy", "worker", *args],
            env=worker_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(f"{self.base}{path}", params=params, timeout=5.0)

    def wait_ready(self, timeout_s: float = 90.0) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited ({self.process.returncode}):\n{self.log()}")
            try:
                if self.get("/readyz").status_code == 200:
                    return time.monotonic() - started
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"worker not ready after {timeout_s}s:\n{self.log()}")

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = self.get("/status").json()
        return body

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError(f"worker ignored signal {sig}:\n{self.log()}") from None
        self._log.close()
        return self.process.returncode

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self._log.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5_000:]
