"""`make run`'s children never outlive it, and its signals escalate: the first
stops cleanly, the second kills the children, a third changes nothing. Real
processes (``python -c "sleep"``), no broker."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.children import Child, spawn
from tools.launcher import Signals, Started

SLEEPER = ["timeit", "-n", "1", "-r", "1", "import time; time.sleep(120)"]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_dies_when_the_launcher_is_killed(tmp_path: Path) -> None:
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from tools.children import spawn\n"
            f"child = spawn('worker', {SLEEPER!r}, Path(sys.argv[1]))\n"
            "print(child.process.pid, flush=True); time.sleep(120)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert launcher.stdout is not None
    child_pid = int(launcher.stdout.readline())
    assert alive(child_pid)
    launcher.kill()  # kill -9: no handler, no finally block runs
    launcher.wait()
    assert wait_gone(child_pid), f"the child {child_pid} outlived its launcher"


def test_stop_terminates_a_child_and_closes_its_log(tmp_path: Path) -> None:
    child = spawn("worker", SLEEPER, tmp_path)
    assert child.running
    assert child.stop(timeout_s=10) is False  # SIGTERM was enough
    assert child.process.returncode == -signal.SIGTERM
    assert child.log.closed


def test_stop_kills_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    stubborn = [
        "timeit",
        "-n",
        "1",
        "-r",
        "1",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)",
    ]
    child = spawn("worker", stubborn, tmp_path)
    time.sleep(0.5)  # let it install its handler
    started = time.monotonic()
    assert child.stop(timeout_s=1) is True
    assert child.process.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 10


class FakeMain:
    def __init__(self) -> None:
        self.cancelled = 0

    def cancel(self) -> bool:
        self.cancelled += 1
        return True


def started_with(tmp_path: Path, *names: str) -> Started:
    return Started(children=[spawn(name, SLEEPER, tmp_path) for name in names])


def reap(children: list[Child]) -> None:
    for child in children:
        child.kill()
        child.stop(timeout_s=5)


def test_the_first_signal_stops_cleanly_and_kills_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = started_with(tmp_path, "worker", "simulator")
    signals = Signals(started)
    main = FakeMain()
    signals.main = main  # type: ignore[assignment]
    try:
        signals()
        assert main.cancelled == 1
        assert not signals.forced
        assert all(child.running for child in started.children)
        assert "stopping (press Ctrl-C again to force)" in capsys.readouterr().out
    finally:
        reap(started.children)


def test_the_second_signal_kills_every_child_and_a_third_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = started_with(tmp_path, "rooms", "worker", "simulator")
    signals = Signals(started)
    signals.SAME_SIGNAL_S = 0.0  # presses far enough apart
    main = FakeMain()
    signals.main = main  # type: ignore[assignment]
    try:
        signals()
        signals()
        assert signals.forced
        for child in started.children:
            assert child.process.wait(5) == -signal.SIGKILL, child.name
        out = capsys.readouterr().out
        assert "forcing the stop: killing simulator, worker, rooms" in out
        signals()
        assert main.cancelled == 1  # the stop that runs is never cancelled
        assert "still stopping" in capsys.readouterr().out
    finally:
        reap(started.children)


def test_one_signal_delivered_twice_at_once_counts_once(tmp_path: Path) -> None:
    """`kill -TERM -- -PGID` under make: the kill and make both deliver it."""
    started = started_with(tmp_path, "worker")
    signals = Signals(started)
    signals.main = FakeMain()  # type: ignore[assignment]
    try:
        signals()
        signals()
        assert not signals.forced
        assert started.children[0].running
        time.sleep(signals.SAME_SIGNAL_S)
        signals()
        assert signals.forced
    finally:
        reap(started.children)


def test_what_a_stop_stops_names_only_what_this_run_started(tmp_path: Path) -> None:
    started = started_with(tmp_path, "rooms", "worker")
    started.broker = True
    try:
        assert started.names() == "worker, rooms, broker"
    finally:
        reap(started.children)


def test_a_forced_child_group_is_killed_whole(tmp_path: Path) -> None:
    """The worker's ingest processes share its session: a forced stop kills them too."""
    parent = [
        "timeit",
        "-n",
        "1",
        "-r",
        "1",
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        f"open({str(tmp_path / 'pid')!r}, 'w').write(str(p.pid)); time.sleep(120)",
    ]
    child = spawn("worker", parent, tmp_path)
    deadline = time.monotonic() + 10
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int((tmp_path / "pid").read_text())
    child.kill()
    child.stop(timeout_s=5)
    assert wait_gone(grandchild)


def test_to_the_end_records_a_start_even_when_cancelled() -> None:
    """A Ctrl-C while the broker starts: the start finishes and is recorded, so the
    stop stops it."""
    from tools.launcher import _to_the_end

    started = Started()

    def slow_start() -> None:
        time.sleep(0.3)
        started.broker = True

    async def scenario() -> None:
        task = asyncio.ensure_future(_to_the_end(slow_start))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert started.broker


def test_children_are_in_sessions_of_their_own(tmp_path: Path) -> None:
    """A Ctrl-C in the terminal reaches the launcher only, which stops them in order."""
    child = spawn("worker", SLEEPER, tmp_path)
    try:
        assert os.getsid(child.process.pid) == child.process.pid != os.getsid(0)
    finally:
        reap([child])


def test_an_incomplete_snapshot_says_which_partitions_and_why() -> None:
    from tools.launcher import incomplete_snapshot

    answer = {
        "id": "20261128T040000000Z",
        "complete": False,
        "missing": [f"sensor_rooms-{n}" for n in range(8)],
        "workers": [{"worker_id": "w", "error": "ingest process 1 does not answer"}],
    }
    line = incomplete_snapshot(answer)
    assert line.startswith("snapshot 20261128T040000000Z incomplete, not published: 8 ")
    assert "sensor_rooms-0, sensor_rooms-1" in line
    assert "and 2 more" in line
    assert "ingest process 1 does not answer" in line
    assert "eddy snapshot create" in line
