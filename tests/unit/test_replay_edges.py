"""The replay CLI at the edges of its input, run as a user runs it: every mistake is
one line on stderr (`eddy: ...`, exit code 2, no traceback) and nothing wrong is
written. Times outside +-2^53 ms, sums that overflow, user functions that raise,
an output that is the input under another name, and agent lists that name none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples" / "replay"
AGENT_EXAMPLES = EXAMPLES / "agents"
REPLAY = [sys.executable, "-m", "eddy", "replay"]
LIMIT = 2**53

SUM_15S = {
    "key": "id",
    "timestamp": "timestamp_ms",
    "watermark": {"type": "ascending"},
    "assigner": {"type": "tumbling", "size_ms": 15000},
    "function": {"type": "sum", "field": "temperature"},
}


def replay(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m eddy replay ARGS`` from ``cwd``, with no ``EDDY_*`` variable
    but those of ``env`` (what the test runs in must not change the answer)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    return subprocess.run(
        [*REPLAY, *args],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The single ``eddy: ...`` line of a replay that stopped on a mistake."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("eddy: "), line
    return line


def spec_replay(
    tmp_path: Path, spec: object, lines: list[str]
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, object]]]:
    """Replay ``lines`` with a window or process spec, writing to an output file."""
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    source = tmp_path / "in.jsonl"
    source.write_text("".join(f"{line}\n" for line in lines))
    out = tmp_path / "out.jsonl"
    out.unlink(missing_ok=True)
    done = replay(
        "--spec", str(spec_path), "--input", str(source), "--output", str(out), cwd=tmp_path
    )
    written = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return done, written


def agent_replay(
    tmp_path: Path, app: str, agent: str, lines: list[str], env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, object]]]:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(f"{line}\n" for line in lines))
    out = tmp_path / "out.jsonl"
    out.unlink(missing_ok=True)
    args = ["--app", app, "--agent", agent, "--input", str(source), "--output", str(out)]
    done = replay(*args, cwd=tmp_path, env=env)
    written = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return done, written


def reading(timestamp_ms: int, temperature: float = 1.0, key: str = "a") -> str:
    record = {"id": key, "temperature": temperature, "timestamp_ms": timestamp_ms}
    return json.dumps({"record": record})


def sensor(timestamp_ms: int, temperature: float) -> str:
    record = {"sensor_id": "s1", "timestamp_ms": timestamp_ms, "temperature": temperature}
    return json.dumps({"topic": "sensor-readings", "record": record})


# -- 1. times outside +-2^53 ms ---------------------------------------------------------


@pytest.mark.parametrize(
    "timestamp_ms",
    [9223372036854775000, -9223372036854775808, LIMIT + 1, -LIMIT - 1],
    ids=["near-2^63", "min-int64", "2^53+1", "-2^53-1"],
)
def test_a_record_time_outside_2_to_the_53_is_refused_as_the_worker_dead_letters_it(
    timestamp_ms: int, tmp_path: Path
) -> None:
    done, written = spec_replay(tmp_path, SUM_15S, [reading(1), reading(timestamp_ms)])
    line = one_line_error(done)
    assert line.startswith(f"eddy: line 2: field 'timestamp_ms' is {timestamp_ms} ms, outside")
    assert "-2^53..2^53 ms" in line
    assert written == []  # the window of line 1 is not flushed as if the input had ended
    # The bounds themselves are times, as they are for the worker.
    done, written = spec_replay(tmp_path, SUM_15S, [reading(-LIMIT), reading(LIMIT)])
    assert done.returncode == 0, done.stderr
    assert [w["value"]["window_start_ms"] for w in written] == [
        t - t % 15000 for t in (-LIMIT, LIMIT)
    ]


@pytest.mark.parametrize("kind", ["watermark", "processing_time"])
@pytest.mark.parametrize("value", [2**63 - 1, -(2**63), LIMIT + 1, -LIMIT - 1])
def test_a_watermark_or_processing_time_outside_2_to_the_53_is_refused(
    kind: str, value: int, tmp_path: Path
) -> None:
    done, written = spec_replay(tmp_path, SUM_15S, [reading(1), json.dumps({kind: value})])
    line = one_line_error(done)
    assert line.startswith(f"eddy: line 2: {kind!r} {value} is outside -2^53..2^53 ms")
    assert written == []


@pytest.mark.parametrize(
    "bad",
    [
        '{"watermark": 9223372036854775807}',
        '{"processing_time": -9007199254740993}',
        json.dumps({**json.loads(sensor(1000, 60.0)), "timestamp_ms": 2**63 - 1}),
    ],
    ids=["watermark", "processing_time", "kafka-timestamp"],
)
def test_whole_agent_replay_refuses_times_outside_2_to_the_53(bad: str, tmp_path: Path) -> None:
    lines = [sensor(1000, 60.0), bad, sensor(2000, 61.0)]
    done, written = agent_replay(tmp_path, "eddy.examples:app", "sensor_averages", lines)
    line = one_line_error(done)
    assert line.startswith("eddy: line 2: ")
    assert "outside -2^53..2^53 ms" in line
    assert written == []  # a watermark of 2^63 - 1 would have closed the window of line 1


# -- 2. overflow ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "lines", "where"),
    [
        ("sum", [reading(1, 1e308), reading(2, 1e308), reading(20000)], "line 3"),
        ("sum", [reading(1, 1e308), reading(2, 1e308)], "at the end of input"),
        ("avg", [reading(1, 1e308), reading(2, 1e308), reading(20000)], "line 3"),
        ("stats", [reading(1, -1e308), reading(2, -1e308)], "at the end of input"),
    ],
)
def test_an_aggregate_that_overflows_is_an_error_not_null(
    function: str, lines: list[str], where: str, tmp_path: Path
) -> None:
    spec = {**SUM_15S, "function": {"type": function, "field": "temperature"}}
    done, written = spec_replay(tmp_path, spec, lines)
    line = one_line_error(done)
    assert line.startswith(f"eddy: {where}: the emission for key 'a' holds ")
    assert "not finite JSON" in line
    assert written == []  # no "value": null


def test_a_process_function_output_that_is_not_finite_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "boost.py").write_text(
        "class Boost:\n"
        "    def process_element(self, value, ctx):\n"
        "        ctx.output(value['temperature'] * 10)\n"
    )
    spec = {
        "kind": "process",
        "function": "boost:Boost",
        "inputs": [{"name": "in", "key": "id", "timestamp": "timestamp_ms"}],
    }
    done, written = spec_replay(tmp_path, spec, [reading(1, 1.0), reading(2, 1e308)])
    line = one_line_error(done)
    assert line == (
        "eddy: line 2: the emission for key 'a' holds inf, which is not finite JSON (an overflow?)"
    )
    assert written == []  # not even line 1's emission: --output is whole or absent
    done = replay("--spec", str(tmp_path / "spec.json"), "--input", str(tmp_path / "in.jsonl"),
                  cwd=tmp_path)  # fmt: skip
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        {"topic": "main", "key": "a", "value": 10.0, "timestamp_ms": 1}  # stdout streams it
    ]


SUM_APP = """\
from eddy import App, BoundedOutOfOrderness, CountEvictor, Sum, Topic, Tumbling

app = App("sums")
READINGS = Topic("readings", key="id", timestamp="timestamp_ms")
SUMS = Topic("sums")


@app.define()
def sums() -> None:
    (
        app.stream(READINGS, watermark=BoundedOutOfOrderness(bound_ms=0))
        .window(Tumbling(size_ms=5000))
        .evictor(CountEvictor(10))
        .aggregate(Sum("temperature"))
        .to(SUMS)
    )
"""


def test_whole_agent_replay_stops_on_an_aggregate_that_overflows(tmp_path: Path) -> None:
    # With an evictor the window keeps its records and sums them when it fires:
    # here on the watermark line, and the sum is infinite. A worker dead-letters
    # a result it cannot write, with the reason, and goes on: so does the replay.
    (tmp_path / "sums.py").write_text(SUM_APP)
    lines = [
        json.dumps(
            {"topic": "readings", "record": {"id": "a", "timestamp_ms": 1, "temperature": t}}
        )
        for t in (1e308, 1e308)
    ]
    done, written = agent_replay(tmp_path, "sums:app", "sums", [*lines, '{"watermark": 6000}'])
    assert done.returncode == 0, done.stderr
    (dead,) = written
    assert (dead["topic"], dead["key"]) == ("dead-letters", "a")
    assert "NaN or infinity" in str(dead["reason"])
    # The reference agent: a reading within the allowed lateness re-fires its
    # window at once, and the average of 1e308 and 1e308 is infinite.
    lines = [sensor(1000, 1e308), sensor(7000, 1.0), sensor(2000, 1e308), sensor(3000, 1.0)]
    env = {"EDDY_ALLOWED_LATENESS_MS": "10000"}
    done, written = agent_replay(tmp_path, "eddy.examples:app", "sensor_averages", lines, env)
    line = one_line_error(done)
    assert line.startswith(f"eddy: line 3: {NOT_WRITTEN}")
    assert "NaN or infinity" in line
    assert written == []  # the first firing (finite) is not written: no partial output


NOT_WRITTEN = "a result or a state value cannot be written: cannot write "


def test_whole_agent_replay_stops_at_the_line_whose_overflow_reached_window_state(
    tmp_path: Path,
) -> None:
    # The state store refuses an infinite sum (JSON would store null and lose the
    # window in silence): the replay stops at line 2, whose reading overflowed.
    lines = [sensor(1000, 1e308), sensor(2000, 1e308), sensor(9000, 1.0)]
    done, written = agent_replay(tmp_path, "eddy.examples:app", "sensor_averages", lines)
    line = one_line_error(done)
    assert line.startswith("eddy: line 2: a result or a state value cannot be written: ")
    assert "NaN or infinity" in line
    assert written == []


# -- 3. user code that raises -----------------------------------------------------------

USER_MODULE = """\
class Divide:
    def process_element(self, value, ctx):
        spread = value["temperature"] - value["temperature"]
        ctx.output(1 / spread)


class Boom:
    def process_element(self, value, ctx):
        raise RuntimeError("boom")


class LateBoom:
    def process_element(self, value, ctx):
        ctx.timer_service.register_event_time_timer(value["timestamp_ms"])

    def on_timer(self, timestamp_ms, ctx):
        raise LookupError("no such reading")


class MissingField:
    def process_element(self, value, ctx):
        ctx.output(value["humidity"])
"""


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (
            "Divide",
            "line 2: the process function raised ZeroDivisionError('float division by zero') "
            "at mymodule.py:4 in process_element",
        ),
        (
            "Boom",
            "line 2: the process function raised RuntimeError('boom') "
            "at mymodule.py:9 in process_element",
        ),
        (
            "LateBoom",
            "at the end of input: the process function raised LookupError('no such reading') "
            "at mymodule.py:17 in on_timer",
        ),
        (
            "MissingField",
            "line 2: the process function raised KeyError('humidity') "
            "at mymodule.py:22 in process_element",
        ),
    ],
)
def test_a_process_function_that_raises_names_the_users_file_and_line(
    function: str, message: str, tmp_path: Path
) -> None:
    (tmp_path / "mymodule.py").write_text(USER_MODULE)
    spec = {
        "kind": "process",
        "function": f"mymodule:{function}",
        "inputs": [{"name": "in", "key": "id", "timestamp": "timestamp_ms"}],
    }
    lines = ['{"watermark": 0}', reading(1), reading(2)]
    done, written = spec_replay(tmp_path, spec, lines)
    assert one_line_error(done) == f"eddy: {message}"
    assert written == []


def test_a_missing_key_field_of_a_process_spec_is_still_an_input_error(tmp_path: Path) -> None:
    # Only errors of the user's function point into it; a record without the
    # spec's key field is the input's mistake, as before.
    (tmp_path / "mymodule.py").write_text(USER_MODULE)
    spec = {
        "kind": "process",
        "function": "mymodule:Boom",
        "inputs": [{"name": "in", "key": "sensor", "timestamp": "timestamp_ms"}],
    }
    done, _ = spec_replay(tmp_path, spec, [reading(1)])
    assert one_line_error(done) == "eddy: line 1: the record has no field 'sensor'"


USER_APP = """\
from eddy import App, BoundedOutOfOrderness, Count, Topic, Tumbling

app = App("ratios")
READINGS = Topic("readings", key="id", timestamp="timestamp_ms")
RATIOS = Topic("ratios")


class PerSecond:
    def process(self, elements, ctx):
        (count,) = elements
        return [count / (ctx.window.end_ms - ctx.window.end_ms)]


@app.define()
def ratios() -> None:
    (
        app.stream(READINGS, watermark=BoundedOutOfOrderness(bound_ms=0))
        .window(Tumbling(size_ms=5000))
        .aggregate(Count(), process=PerSecond())
        .to(RATIOS)
    )
"""


def test_an_agents_window_function_that_raises_names_the_users_file_and_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "ratios.py").write_text(USER_APP)
    record = {"id": "a", "timestamp_ms": 1000}
    lines = [
        json.dumps({"topic": "readings", "record": record}),
        '{"processing_time": 5}',
        '{"watermark": 6000}',
    ]
    done, written = agent_replay(tmp_path, "ratios:app", "ratios", lines)
    assert one_line_error(done) == (
        "eddy: line 3: an agent raised ZeroDivisionError('division by zero') "
        "at ratios.py:11 in process"
    )
    assert written == []


# -- 4. the output is the input (or the spec) under another name -----------------------


def test_an_output_that_is_the_input_under_another_name_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SUM_15S))
    source = tmp_path / "in.jsonl"
    content = reading(1) + "\n"
    source.write_text(content)
    hardlink = tmp_path / "hardlink.jsonl"
    os.link(source, hardlink)
    symlink = tmp_path / "symlink.jsonl"
    symlink.symlink_to(source)
    spec_link = tmp_path / "spec-link.json"
    os.link(spec, spec_link)
    for output, names in [(hardlink, "the input"), (symlink, "the input"), (spec_link, "the spec")]:
        done = replay(
            "--spec", str(spec), "--input", str(source), "--output", str(output), cwd=tmp_path
        )
        line = one_line_error(done)
        assert line == f"eddy: replay: --output {output} is {names} file; write elsewhere"
        assert source.read_text() == content
        assert json.loads(spec.read_text()) == SUM_15S


# -- 5. whole-agent replay: which agents, which settings --------------------------------


def test_an_agent_list_that_names_no_agent_is_refused_listing_the_apps_agents(
    tmp_path: Path,
) -> None:
    source = AGENT_EXAMPLES / "sensor_averages.input.jsonl"
    for agents in ["sensor_average", "", " , "]:
        args = ["--app", "eddy.examples:app", "--agent", agents, "--input", str(source)]
        done = replay(*args, cwd=tmp_path)
        line = one_line_error(done)
        assert "(its agents: " in line
        assert "sensor_averages" in line
        assert done.stdout == ""


def test_a_misspelt_setting_is_refused_in_whole_agent_replay_as_in_the_worker(
    tmp_path: Path,
) -> None:
    source = AGENT_EXAMPLES / "sensor_averages.input.jsonl"
    args = ["--app", "eddy.examples:app", "--agent", "sensor_averages", "--input", str(source)]
    done = replay(*args, cwd=tmp_path, env={"EDDY_WINDOW_SIZE_MZ": "10000"})
    line = one_line_error(done)
    assert line.startswith("eddy: unknown setting: EDDY_WINDOW_SIZE_MZ (did you mean ")
    assert "EDDY_WINDOW_SIZE_MS" in line
    assert done.stdout == ""
