"""``make bench-quick`` as a test: every benchmark contender computes the right windows.

20k readings through every contender (Eddy at-least-once and exactly-once, Faust,
Quix, Kafka Streams, the aiokafka ceilings), each one's windows compared with an
offline recomputation. Speed is not asserted: the full benchmark measures it.
Marked slow, like the other benchmark runs: ``make bench-quick`` runs the same
(and fails on a wrong window), so ``make test`` keeps its 30 min budget.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.contenders import CONTENDERS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.timeout(900)
def test_every_contender_computes_the_recomputed_windows(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--results-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=880,
    )
    assert run.returncode == 0, run.stderr[-5_000:]
    results = json.loads((tmp_path / "quick.json").read_text())
    drains = {d["contender"]: d for d in results["drains"]}
    assert set(drains) == {c.name for c in CONTENDERS}
    for c in CONTENDERS:
        drain = drains[c.name]
        assert drain["drained"], f"{c.name} did not reach the end of the input"
        if c.windowed:
            correct = drain["correct"]
            assert correct["ok"], f"{c.name}: {correct}"
            assert correct["windows"] == results["inputs"]["6"]["closed_windows"]
