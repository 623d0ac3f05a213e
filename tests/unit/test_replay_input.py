"""The replay's input is read with bounded memory: a line longer than
``--max-line-bytes`` is refused with its number and the limit, after reading no
more than the limit of it, so ``/dev/zero`` or a file without newlines stops the
replay at once; a malformed line stops a window replay and an agent replay alike,
naming the line; a long replay holds its state, not its output.

Memory is measured as the replay process's own peak RSS (``VmHWM`` of
``/proc/self/status`` as it exits), against the same replay of a one-line input.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, NamedTuple

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eddy.replay import load_spec, replay
from eddy.replay_files import (
    DEFAULT_MAX_LINE_BYTES,
    InputLine,
    ReplayInputError,
    read_records,
)

ROOT = Path(__file__).resolve().parents[2]
REPLAY = [sys.executable, "-m", "eddy", "replay"]
MIB = 1024 * 1024

COUNT_5S = {
    "key": "id",
    "timestamp": "ts",
    "watermark": {"type": "none"},
    "assigner": {"type": "tumbling", "size_ms": 5000},
    "function": {"type": "count"},
}


class Run(NamedTuple):
    returncode: int
    stderr: str
    peak_rss_mb: float
    elapsed_s: float


# ``python -m eddy replay ARGS`` that writes its peak RSS (VmHWM, in KiB) to a
# file as it exits. The process's own figure: getrusage's ru_maxrss would include
# the test's memory, which a child holds between fork and exec.
PEAK_REPORTING = """\
import atexit, sys
from pathlib import Path

def report() -> None:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            Path(sys.argv[1]).write_text(line.split()[1])

atexit.register(report)
from eddy.cli import main
raise SystemExit(main(["replay", *sys.argv[2:]]))
"""


def measured(args: list[str], cwd: Path, timeout_s: float = 60.0) -> Run:
    """Run ``python -m eddy replay ARGS``; its exit code, stderr, peak RSS and
    how long it took."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    peak = cwd / f"peak-{time.monotonic_ns()}.txt"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", PEAK_REPORTING, str(peak), *args],
        cwd=cwd,
        env=clean,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        timeout=timeout_s,
    )
    elapsed_s = time.monotonic() - started
    return Run(done.returncode, done.stderr, int(peak.read_text()) / 1024, elapsed_s)


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(COUNT_5S))
    return spec


@pytest.fixture
def baseline_rss_mb(tmp_path: Path, spec_file: Path) -> float:
    """The peak RSS of a replay of one short line: what Python and Eddy cost."""
    small = tmp_path / "small.jsonl"
    small.write_text('{"record": {"id": "a", "ts": 1}}\n')
    run = measured(["--spec", str(spec_file), "--input", str(small)], tmp_path)
    assert run.returncode == 0, run.stderr
    return run.peak_rss_mb


# -- the reader ---------------------------------------------------------------------------


def records(data: bytes, max_line_bytes: int) -> list[InputLine]:
    return list(read_records(io.BytesIO(data), max_line_bytes=max_line_bytes))


def test_a_line_of_exactly_the_limit_is_read_and_one_byte_more_is_refused() -> None:
    line = b'{"pad": "' + b"x" * 90 + b'"}'  # 101 bytes
    assert records(line + b"\n", max_line_bytes=101) == [(1, {"pad": "x" * 90})]
    assert records(line, max_line_bytes=101) == [(1, {"pad": "x" * 90})]  # no newline
    with pytest.raises(ReplayInputError) as refused:
        records(b"\n" + line + b"\n", max_line_bytes=100)
    assert str(refused.value) == (
        "line 2: longer than 100 bytes, the limit; raise it with --max-line-bytes, "
        "or split the record"
    )


def test_blank_lines_are_skipped_but_counted() -> None:
    data = b'\n  \r\n{"watermark": 1}\n\t\n[2]\n'
    assert records(data, max_line_bytes=100) == [
        (3, {"watermark": 1}),
        (5, [2]),
    ]


class Endless(io.RawIOBase):
    """A stream with no end and no newline, as ``/dev/zero``; counts what is read."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)
        view[:] = b"a" * len(view)
        self.read_bytes += len(view)
        return len(view)


def consume(stream: IO[bytes], limit: int) -> tuple[list[InputLine], str | None]:
    """What the reader yields from ``stream``, and the message it stopped on."""
    got: list[InputLine] = []
    try:
        for line in read_records(stream, max_line_bytes=limit):
            got.append(line)
    except ReplayInputError as exc:
        return got, str(exc)
    return got, None


def test_a_line_that_never_ends_is_refused_after_reading_the_limit() -> None:
    endless = Endless()
    got, error = consume(io.BufferedReader(endless), 1_000_000)
    assert got == []
    assert error is not None
    assert error.startswith("line 1: longer than 1000000 bytes, the limit")
    assert 1_000_000 < endless.read_bytes <= 1_000_000 + io.DEFAULT_BUFFER_SIZE


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
LINES = st.one_of(
    JSON_VALUES.map(orjson.dumps),
    st.sampled_from([b"", b"  ", b"\t\r", b"{oops", b"NaN", b"[1,", b"\xff\xfe"]),
    st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")),
)


@given(lines=st.lists(LINES, max_size=12), limit=st.integers(1, 60), newline_at_end=st.booleans())
def test_the_reader_yields_every_line_up_to_the_first_bad_one_with_its_number(
    lines: list[bytes], limit: int, newline_at_end: bool
) -> None:
    data = b"\n".join(lines) + (b"\n" if newline_at_end and lines else b"")
    expected: list[InputLine] = []
    error = None
    for number, line in enumerate(lines, start=1):
        # The limit counts the line's bytes, a "\r" of "\r\n" included.
        if len(line) > limit:
            error = f"line {number}: longer than {limit} bytes"
            break
        if not line or line.isspace():
            continue
        try:
            expected.append((number, orjson.loads(line)))
        except orjson.JSONDecodeError:
            error = f"line {number}: not JSON ("
            break
    got, stopped = consume(io.BytesIO(data), limit)
    assert got == expected
    if error is None:
        assert stopped is None
    else:
        assert stopped is not None
        assert stopped.startswith(error)


@given(data=st.binary(max_size=3000), limit=st.integers(1, 200))
def test_any_bytes_give_numbered_json_or_one_input_error(data: bytes, limit: int) -> None:
    """The fuzz target's invariant: nothing but lines or a ReplayInputError."""
    got, stopped = consume(io.BytesIO(data), limit)
    numbers = [number for number, _ in got]
    assert stopped is None or stopped.startswith("line ")
    assert numbers == sorted(set(numbers))
    assert all(1 <= n <= data.count(b"\n") + 1 for n in numbers)


# -- the command line ---------------------------------------------------------------------


def test_max_line_bytes_raises_the_limit(tmp_path: Path, spec_file: Path) -> None:
    line = json.dumps({"record": {"id": "a", "ts": 1, "pad": "x" * 200}})
    source = tmp_path / "in.jsonl"
    source.write_text(f"{line}\n")
    args = ["--spec", str(spec_file), "--input", str(source)]
    refused = measured([*args, "--max-line-bytes", str(len(line) - 1)], tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"eddy: line 1: longer than {len(line) - 1} bytes, the limit; "
        "raise it with --max-line-bytes, or split the record"
    )
    accepted = measured([*args, "--max-line-bytes", str(len(line))], tmp_path)
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stderr.strip() == "replay: 1 emissions"


def test_the_default_limit_is_the_one_the_help_states() -> None:
    done = subprocess.run([*REPLAY, "--help"], capture_output=True, text=True, check=True)
    assert f"(default: {DEFAULT_MAX_LINE_BYTES}, 8 MiB)" in " ".join(done.stdout.split())


@pytest.mark.parametrize("value", ["0", "-5", "lots", str(2**30 + 1)])
def test_a_max_line_bytes_that_is_not_a_size_is_a_usage_error(
    value: str, tmp_path: Path, spec_file: Path
) -> None:
    done = subprocess.run(
        [*REPLAY, "--spec", str(spec_file), "--input", str(spec_file), "--max-line-bytes", value],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("eddy: argument --max-line-bytes: ")


def _feed_fifo(fifo: Path, head: bytes, chunks: int, chunk: bytes, written: list[int]) -> None:
    """Write ``head`` and ``chunks`` copies of ``chunk`` to a FIFO until the
    reader goes away; count what was written."""
    try:
        with fifo.open("wb") as pipe:
            pipe.write(head)
            for _ in range(chunks):
                pipe.write(chunk)
                written[0] += len(chunk)
            pipe.write(b'"}}\n')
    except BrokenPipeError:
        pass


def test_a_300_mb_line_is_refused_having_read_only_the_limit(
    tmp_path: Path, spec_file: Path, baseline_rss_mb: float
) -> None:
    # The line is made as it is read, through a FIFO: 300 MB are never on disk.
    fifo = tmp_path / "huge.jsonl"
    os.mkfifo(fifo)
    written = [0]
    head = b'{"record": {"id": "a", "ts": 1, "pad": "'
    feeder = threading.Thread(
        target=_feed_fifo, args=(fifo, head, 300, b"x" * MIB, written), daemon=True
    )
    feeder.start()
    out = tmp_path / "out.jsonl"
    run = measured(["--spec", str(spec_file), "--input", str(fifo), "--output", str(out)], tmp_path)
    feeder.join(timeout=10)
    assert run.returncode == 2
    assert run.stderr.strip() == (
        f"eddy: line 1: longer than {DEFAULT_MAX_LINE_BYTES} bytes, the limit; "
        "raise it with --max-line-bytes, or split the record"
    )
    assert written[0] < DEFAULT_MAX_LINE_BYTES + 4 * MIB  # the rest was never asked for
    growth_mb = run.peak_rss_mb - baseline_rss_mb
    print(f"300 MB line: {run.elapsed_s:.2f} s, peak RSS +{growth_mb:.1f} MB")
    assert growth_mb < 40  # the limit (8 MiB), a copy of it and slack; not 300 MB or 1 GB
    assert not out.exists()


def test_dev_zero_is_refused_at_once_with_bounded_memory(
    tmp_path: Path, spec_file: Path, baseline_rss_mb: float
) -> None:
    out = tmp_path / "out.jsonl"
    args = ["--spec", str(spec_file), "--input", "/dev/zero", "--output", str(out)]
    run = measured(args, tmp_path, timeout_s=30)
    assert run.returncode == 2
    assert run.stderr.strip().startswith(f"eddy: line 1: longer than {DEFAULT_MAX_LINE_BYTES}")
    growth_mb = run.peak_rss_mb - baseline_rss_mb
    print(f"/dev/zero: {run.elapsed_s:.2f} s, peak RSS +{growth_mb:.1f} MB")
    assert growth_mb < 40
    assert run.elapsed_s < 15  # Python's start-up included; the reading itself takes ms
    assert not out.exists()


def test_a_spec_that_never_ends_is_refused_too(tmp_path: Path) -> None:
    run = measured(["--spec", "/dev/zero", "--input", "/dev/null"], tmp_path, timeout_s=30)
    assert run.returncode == 2
    assert run.stderr.strip() == ("eddy: spec /dev/zero is larger than 1048576 bytes: not a spec")


def test_a_long_replay_holds_its_state_not_its_output(tmp_path: Path) -> None:
    """Every line fires a window (1 ms windows, an ascending watermark): ten
    times the lines, ten times the output, about the same memory."""
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {**COUNT_5S, "watermark": {"type": "ascending"},
             "assigner": {"type": "tumbling", "size_ms": 1}}
        )
    )  # fmt: skip
    peaks = []
    for lines in (10_000, 100_000):
        source = tmp_path / f"in-{lines}.jsonl"
        with source.open("w") as f:
            for ts in range(lines):
                f.write(f'{{"record": {{"id": "sensor-{ts % 10}", "ts": {ts}}}}}\n')
        out = tmp_path / f"out-{lines}.jsonl"
        run = measured(
            ["--spec", str(spec), "--input", str(source), "--output", str(out)], tmp_path
        )
        assert run.returncode == 0, run.stderr
        assert run.stderr.strip() == f"replay: {lines} emissions"
        peaks.append(run.peak_rss_mb)
        print(f"{lines} lines: {run.elapsed_s:.2f} s, peak RSS {run.peak_rss_mb:.1f} MB")
    # Kept, the 90,000 more emissions would take some 27 MB more.
    assert peaks[1] - peaks[0] < 8


def test_a_long_agent_replay_holds_its_state_not_what_the_agents_sent(tmp_path: Path) -> None:
    """Each line is copied to the output: ten times the lines, the same memory.
    (Kept, the 18,000 more records sent took some 145 MB more.)"""
    (tmp_path / "tinyapp.py").write_text(TINY_APP)
    peaks = []
    for lines in (2_000, 20_000):
        source = tmp_path / f"in-{lines}.jsonl"
        line = json.dumps({"topic": "readings", "record": {"id": "a", "pad": "x" * 1000}})
        source.write_text(f"{line}\n" * lines)
        out = tmp_path / f"out-{lines}.jsonl"
        args = ["--app", "tinyapp:app", "--agent", "copy", "--input", str(source)]
        run = measured([*args, "--output", str(out)], tmp_path)
        assert run.returncode == 0, run.stderr
        assert run.stderr.strip() == f"replay: {lines} emissions"
        peaks.append(run.peak_rss_mb)
        print(f"{lines} agent lines: {run.elapsed_s:.2f} s, peak RSS {run.peak_rss_mb:.1f} MB")
    assert peaks[1] - peaks[0] < 16


# -- malformed lines: the same in a window replay and an agent replay ---------------------

TINY_APP = """\
from eddy import App, Topic

app = App("copy")
app.stream(Topic("readings"), name="copy").to(Topic("copies"))
"""
MODES = {
    "spec": ["--spec", "spec.json"],
    "app": ["--app", "tinyapp:app", "--agent", "copy"],
}
GOOD = {
    "spec": '{"record": {"id": "a", "ts": 1}}',
    "app": '{"topic": "readings", "record": {"id": "a"}}',
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        pytest.param("{oops", "eddy: line 3: not JSON (", id="not-json"),
        pytest.param("\ufeff{}", "eddy: line 3: not JSON (UTF-8 byte order mark", id="bom"),
        pytest.param('{"x": 1e400}', "eddy: line 3: not JSON (number is infinity", id="1e400"),
        pytest.param("[" * 2000, "eddy: line 3: not JSON (depth limit exceeded", id="deep"),
        pytest.param("x" * 4097, "eddy: line 3: longer than 4096 bytes", id="too-long"),
        pytest.param("[1, 2]", "eddy: line 3: expected ", id="not-an-object"),
    ],
)
def test_a_malformed_line_stops_either_replay_naming_its_line(
    mode: str, bad: str, message: str, tmp_path: Path
) -> None:
    (tmp_path / "spec.json").write_text(json.dumps(COUNT_5S))
    (tmp_path / "tinyapp.py").write_text(TINY_APP)
    source = tmp_path / "in.jsonl"
    source.write_text(f"{GOOD[mode]}\n\n{bad}\n{GOOD[mode]}\n")
    out = tmp_path / "out.jsonl"
    args = [*MODES[mode], "--input", str(source), "--output", str(out)]
    run = measured([*args, "--max-line-bytes", "4096"], tmp_path)
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith(message), line
    assert not out.exists()


# -- the whole window replay, over any input ----------------------------------------------

EXAMPLES = ROOT / "docs" / "examples" / "replay"
SPECS = {
    name: load_spec(EXAMPLES / f"{name}.spec.json")
    for name in ("late-readings", "count-timeout", "session-3s", "window-join", "min-max-5s")
}
TIMES = st.one_of(
    st.integers(-(2**53), 2**53), st.integers(), st.floats(), st.text(max_size=3), st.none()
)
FIELDS = st.sampled_from(["id", "vehicle_id", "timestamp_ms", "temperature", "speed", "x"])
RECORDS = st.dictionaries(FIELDS, TIMES | JSON_VALUES, max_size=5)
REPLAY_LINES = (
    st.one_of(
        st.builds(lambda r: {"record": r}, RECORDS),
        st.builds(lambda r, i: {"record": r, "input": i}, RECORDS, st.sampled_from(["obd", "x"])),
        st.builds(lambda t: {"watermark": t}, TIMES),
        st.builds(lambda t: {"processing_time": t}, TIMES),
        JSON_VALUES,
    ).map(lambda line: json.dumps(line).encode())
    | LINES
)  # json: any integer, and NaN


@given(name=st.sampled_from(sorted(SPECS)), lines=st.lists(REPLAY_LINES, max_size=15))
def test_any_input_gives_json_lines_or_one_error_naming_where(
    name: str, lines: list[bytes]
) -> None:
    """What a user sees of a window replay, whatever the file: JSON lines, then
    at most one message that names a line (or the end of input); never another
    exception, which the command line would show as a traceback."""
    emitted: list[bytes] = []
    stopped = None
    try:
        source = read_records(io.BytesIO(b"\n".join(lines)), max_line_bytes=200)
        emitted.extend(replay(SPECS[name], source))
    except ReplayInputError as exc:
        stopped = str(exc)
    assert stopped is None or stopped.startswith(("line ", "at the end of input: "))
    assert all(isinstance(orjson.loads(line), dict) for line in emitted)
