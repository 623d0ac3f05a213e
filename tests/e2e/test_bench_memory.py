"""``bench.memory`` and ``bench.soak`` end to end, small: each one's results file says
what the full runs report, and the windows they check are right.

The full runs (``make bench-memory``, ``make bench-soak``) measure; these only
check that the harness runs the worker, samples every process of it and checks
its output, in well under a minute each.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def _run(argv: list[str], timeout_s: float) -> None:
    run = subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, timeout=timeout_s
    )
    assert run.returncode == 0, run.stderr[-5_000:]


@pytest.mark.timeout(180)
def test_the_memory_run_samples_each_worker_process_and_checks_the_windows(
    tmp_path: Path,
) -> None:
    _run(["bench.memory", "--keys", "20000", "--results-dir", str(tmp_path)], 170)
    result = json.loads((tmp_path / "memory.json").read_text())
    assert set(result["rss_per_process"]) == {"query", "ingest-0"}
    assert result["correct"]["ok"]
    assert result["correct"]["windows"] == 20_000
    assert result["state_keys"] > 0
    assert result["drain"]["drained"]


@pytest.mark.timeout(180)
def test_a_short_soak_keeps_up_and_its_closed_windows_add_up(tmp_path: Path) -> None:
    argv = ["bench.soak", "--minutes", "0.5", "--rate", "2000"]
    _run([*argv, "--results-dir", str(tmp_path)], 170)
    result = json.loads((tmp_path / "soak.json").read_text())
    assert result["kept_up"]
    assert result["correct"]["ok"]
    assert result["correct"]["closed_windows"] >= 3
    assert set(result["rss_after_warmup"]) == {"query", "ingest-0"}
    assert (tmp_path / "soak.png").stat().st_size > 0
