"""``python -m eddy worker --app <spec>`` as a user starts it: from a folder, with
the environment given, its API on ``EDDY_API_PORT``, its output in a log file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx


class AppWorker:
    def __init__(self, spec: str, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.url = f"http://127.0.0.1:{env['EDDY_API_PORT']}"
        self.log_path = log
        self._log = log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "eddy", "worker", "--app", spec],
            cwd=cwd,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, timeout_s: float = 60.0) -> None:
        self.process.terminate()
        self.process.wait(timeout_s)
        self._log.close()
