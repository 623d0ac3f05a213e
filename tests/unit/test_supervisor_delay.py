"""When the supervisor starts a killed ingest process again: after the session
timeout and a half when others can take its partitions over, after a second when
it was the only one running; doubling while it keeps dying young."""

from __future__ import annotations

import time
from pathlib import Path

from eddy.plane.status import ReportFile
from eddy.plane.supervisor import STEADY_S, Child, Supervisor


def child(tmp_path: Path) -> Child:
    child = Child(0, ReportFile(tmp_path / "0.json"), tmp_path / "0.prom")
    child.started_at = time.monotonic()
    return child


def test_a_lone_process_restarts_at_once_and_backs_off_while_it_keeps_dying(
    tmp_path: Path,
) -> None:
    lone = child(tmp_path)
    delays = [Supervisor._restart_delay(lone, 6.0, alone=True) for _ in range(4)]
    assert delays == [1.0, 2.0, 4.0, 8.0]


def test_with_others_running_it_waits_for_its_partitions_to_move(tmp_path: Path) -> None:
    one = child(tmp_path)
    assert [Supervisor._restart_delay(one, 6.0) for _ in range(2)] == [9.0, 18.0]
    one.started_at = time.monotonic() - STEADY_S  # it ran a minute: not a crash loop
    assert Supervisor._restart_delay(one, 6.0) == 9.0
