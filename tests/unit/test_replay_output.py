"""``--output`` appears whole or not at all: the replay writes a temporary file
next to it and renames it only when the replay succeeds. A replay that stops on a
bad line (window or agent replay), is interrupted with Ctrl-C or is terminated
leaves no output, no temporary file, and an earlier output as it was.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPLAY = [sys.executable, "-m", "eddy", "replay"]

COUNT_5S = {
    "key": "id",
    "timestamp": "ts",
    "watermark": {"type": "ascending"},
    "assigner": {"type": "tumbling", "size_ms": 5000},
    "function": {"type": "count"},
}


def record(ts: int, key: str = "a") -> str:
    return json.dumps({"record": {"id": key, "ts": ts}})


def sensor(ts: int, temperature: float = 60.0) -> str:
    body = {"sensor_id": "s1", "timestamp_ms": ts, "temperature": temperature}
    return json.dumps({"topic": "sensor-readings", "record": body})


def replay(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    return subprocess.run(
        [*REPLAY, *args], cwd=cwd, env=clean, capture_output=True, text=True, timeout=120
    )


def leftovers(folder: Path) -> list[str]:
    """Temporary files of the replay's output (``.out.jsonl.<random>.tmp``)."""
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(COUNT_5S))
    return path


def test_a_replay_that_succeeds_writes_the_whole_output(tmp_path: Path, spec: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(record(ts) for ts in (1000, 6000, 12000)) + "\n")
    out = tmp_path / "out.jsonl"
    done = replay(tmp_path, "--spec", str(spec), "--input", str(source), "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert [
        json.loads(line)["value"]["window_start_ms"] for line in out.read_text().splitlines()
    ] == [
        0,
        5000,
        10000,
    ]
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("earlier", [None, "an earlier output\n"], ids=["new", "existing"])
def test_a_window_replay_that_stops_on_a_bad_line_leaves_no_partial_output(
    tmp_path: Path, spec: Path, earlier: str | None
) -> None:
    # Lines 1-3 fire two windows before line 4 stops the replay.
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join([record(1000), record(6000), record(12000), "{oops"]) + "\n")
    out = tmp_path / "out.jsonl"
    if earlier is not None:
        out.write_text(earlier)
    done = replay(tmp_path, "--spec", str(spec), "--input", str(source), "--output", str(out))
    assert done.returncode == 2
    assert done.stderr.strip().startswith("eddy: line 4: not JSON")
    if earlier is None:
        assert not out.exists()
    else:
        assert out.read_text() == earlier
    assert leftovers(tmp_path) == []


def test_an_agent_replay_that_stops_on_a_bad_line_leaves_no_partial_output(
    tmp_path: Path,
) -> None:
    # sensor_averages fires [0, 5000) on the reading at 7000; line 3 is not JSON.
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join([sensor(1000), sensor(7000), "{oops"]) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["--app", "eddy.examples:app", "--agent", "sensor_averages", "--input", str(source)]
    done = replay(tmp_path, *args, "--output", str(out))
    assert done.returncode == 2
    assert done.stderr.strip().startswith("eddy: line 3: not JSON")
    assert not out.exists()
    assert leftovers(tmp_path) == []
    # On stdout the output streams: what came before the bad line is there.
    done = replay(tmp_path, *args)
    assert done.returncode == 2
    assert [json.loads(line)["topic"] for line in done.stdout.splitlines()] == ["sensor-averages"]


def test_replacing_an_output_keeps_its_permissions_and_its_link(tmp_path: Path, spec: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(record(1000) + "\n")
    real = tmp_path / "results" / "out.jsonl"
    real.parent.mkdir()
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "out.jsonl"
    link.symlink_to(real)
    done = replay(tmp_path, "--spec", str(spec), "--input", str(source), "--output", str(link))
    assert done.returncode == 0, done.stderr
    assert link.is_symlink()
    assert json.loads(real.read_text())["value"]["value"] == 1
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert leftovers(real.parent) == []


def test_an_output_that_is_not_a_file_is_written_in_place(tmp_path: Path, spec: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(record(1000) + "\n")
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = replay(tmp_path, "--spec", str(spec), "--input", str(source), "--output", str(fifo))
    reader.join(timeout=10)
    assert done.returncode == 0, done.stderr
    assert json.loads(received[0])["value"]["value"] == 1
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert leftovers(tmp_path) == []


def test_an_output_in_a_folder_that_does_not_exist_is_one_line(tmp_path: Path, spec: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(record(1000) + "\n")
    out = tmp_path / "missing" / "out.jsonl"
    done = replay(tmp_path, "--spec", str(spec), "--input", str(source), "--output", str(out))
    assert done.returncode == 2
    assert done.stderr.strip() == f"eddy: cannot write {out}: No such file or directory"


@pytest.mark.parametrize(
    ("how", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"]
)
def test_an_interrupted_replay_leaves_no_output_and_no_temporary_file(
    tmp_path: Path, spec: Path, how: signal.Signals, code: int
) -> None:
    # The input is a FIFO this test writes to: the replay waits for more lines,
    # mid-way through its output, when the signal comes.
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out.jsonl"
    out.write_text("an earlier output\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    child = subprocess.Popen(
        [*REPLAY, "--spec", str(spec), "--input", str(fifo), "--output", str(out)],
        cwd=tmp_path,
        env=clean,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    with fifo.open("w") as pipe:
        pipe.write("\n".join(record(ts) for ts in range(0, 50_000, 1000)) + "\n")
        pipe.flush()
        deadline = time.monotonic() + 60
        while not leftovers(tmp_path):  # the replay is writing its output
            assert time.monotonic() < deadline, "the replay never started its output"
            time.sleep(0.02)
        time.sleep(0.3)  # and has read what was written
        child.send_signal(how)
        _, stderr = child.communicate(timeout=30)
    assert child.returncode == code, stderr
    assert "Traceback" not in stderr
    assert out.read_text() == "an earlier output\n"
    assert leftovers(tmp_path) == []
