"""A short fuzzing run of every decoder in the unit tests (``make fuzz`` runs a
million inputs): atheris, coverage-guided, feeds the JSON, Avro, Protobuf and
JSON Schema serdes, the key serdes and whole sources, under adversarial writer
schemas. Each input must decode or be refused with a one-line DecodeError,
within 100 ms of CPU, and memory must not grow."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from eddy.serde import DecodeError
from tools.fuzz.runner import Runner
from tools.fuzz.targets import Target, run_one

ROOT = Path(__file__).resolve().parents[2]


def test_ten_seconds_of_fuzzing_find_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tools.fuzz", "--seconds", "10", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    summary = done.stdout.splitlines()[0] if done.stdout else done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert "findings 0 " in summary
    assert ", 0 inputs over 100 ms" in summary
    inputs = int(re.search(r"([\d,]+) inputs in", summary)[1].replace(",", ""))  # type: ignore[index]
    assert inputs >= 5_000, summary  # 2,000 to 20,000 a second, by the machine's load
    growth = float(re.search(r"growth ([+-][\d.]+) MB", summary)[1])  # type: ignore[index]
    assert growth < 50, summary


def _broken(data: bytes) -> None:
    if data.startswith(b"boom"):
        raise TypeError("not a DecodeError")
    raise DecodeError("refused")


def test_an_input_that_breaks_the_invariant_is_a_finding_and_is_kept(tmp_path: Path) -> None:
    runner = Runner([Target("broken", _broken)], tmp_path, "test")
    for data in (b"\x00ok", b"\x00boom", b"\x00fine"):
        runner.one(data)
    figures = runner.finish()
    assert (figures.inputs, figures.refused, figures.findings) == (3, 2, 1)
    assert figures.described[0].endswith("TypeError: not a DecodeError")
    kept = [p for p in tmp_path.iterdir() if p.suffix != ".txt"]
    assert [p.read_bytes() for p in kept] == [b"\x00boom"]


def test_a_reason_on_more_than_one_line_breaks_the_invariant() -> None:
    def two_lines(data: bytes) -> None:
        raise DecodeError("first\nsecond")

    with pytest.raises(AssertionError, match="a reason that is not one line"):
        run_one([Target("two-lines", two_lines)], b"\x00x")
