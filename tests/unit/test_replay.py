"""The replay CLI (docs/replay.md): every example under docs/examples/replay gives
its expected output byte for byte, and mistakes in a spec or an input line are one
clear line on stderr with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eddy.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples" / "replay"
NAMES = sorted(p.name.removesuffix(".spec.json") for p in EXAMPLES.glob("*.spec.json"))


def test_the_documented_examples_are_all_there() -> None:
    assert set(NAMES) >= {
        "min-max-5s",
        "min-temp-15s",
        "avg-temp-15s",
        "early-firing-1s",
        "late-readings",
        "delay-2s",
        "session-3s",
        "count-timeout",
        "sliding-gap",
        "temp-increase",
        "thresholds-broadcast",
        "interval-join",
        "join-002",
        "window-join",
    }


@pytest.mark.parametrize("name", NAMES)
def test_example_replays_to_its_expected_output(name: str, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    code = main(
        [
            "replay",
            "--spec",
            str(EXAMPLES / f"{name}.spec.json"),
            "--input",
            str(EXAMPLES / f"{name}.input.jsonl"),
            "--output",
            str(out),
        ]
    )
    assert code == 0
    expected = (EXAMPLES / f"{name}.output.jsonl").read_bytes()
    assert out.read_bytes() == expected
    assert all(_destination(json.loads(line)) for line in expected.splitlines())


def _destination(line: dict[str, object]) -> object:
    # Every replay names the topic (a spec's "main" or side output) of each line.
    return line["topic"]


AGENTS = EXAMPLES / "agents"
AGENT_NAMES = sorted(p.name.removesuffix(".input.jsonl") for p in AGENTS.glob("*.input.jsonl"))


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_each_reference_agent_replays_to_its_expected_output(agent: str, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    args = ["replay", "--app", "eddy.examples:app", "--agent", agent]
    code = main([*args, "--input", str(AGENTS / f"{agent}.input.jsonl"), "--output", str(out)])
    assert code == 0
    expected = (AGENTS / f"{agent}.output.jsonl").read_bytes()
    assert out.read_bytes() == expected
    assert all(_destination(json.loads(line)) for line in expected.splitlines())


def test_every_reference_agent_has_a_replay_example() -> None:
    from eddy import examples

    # Those that need a service of their own, or exist for the chaos harness.
    assert set(AGENT_NAMES) == set(examples.app.default_agents)


def test_an_unknown_agent_names_the_known_ones(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text("")
    done = subprocess.run(
        [*REPLAY, "--app", "eddy.examples:app", "--agent", "team_powerup", "--input", str(data)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("eddy: EDDY_AGENTS: team_powerup not in app eddy (its agents: ")
    assert "team_powerups" in line


def test_a_pipeline_spec_says_to_replay_the_agent(tmp_path: Path) -> None:
    spec = tmp_path / "old.spec.json"
    spec.write_text('{"kind": "pipeline", "pipelines": ["sensor_averages"]}')
    done = subprocess.run(
        [*REPLAY, "--spec", str(spec), "--input", str(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "--app module:app --agent NAME" in done.stderr


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"topic": "tweets-typo", "record": {}}', "line 1: no agent of the app reads topic"),
        ('{"record": {}}', 'line 1: expected {"topic": name, "record": {...}}'),
        ('{"processing_time": "soon"}', "line 1: 'processing_time' must be integer"),
    ],
)
def test_a_bad_agent_input_line_is_one_line_naming_it(
    tmp_path: Path, line: str, message: str
) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text(line + "\n")
    done = subprocess.run(
        [*REPLAY, "--app", "eddy.examples:app", "--agent", "hashtag_counts", "--input", str(data)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    (error,) = done.stderr.strip().splitlines()
    assert message in error


def test_the_output_may_not_be_the_input(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text('{"watermark": 1}\n')
    done = subprocess.run(
        [*REPLAY, "--app", "eddy.examples:app", "--agent", "sensor_averages", "--input", str(data),
         "--output", str(data)],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "is the input file" in done.stderr
    assert data.read_text() == '{"watermark": 1}\n'


REPLAY = [sys.executable, "-m", "eddy", "replay"]


def test_python_dash_m_eddy_replay_writes_to_stdout() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "eddy",
            "replay",
            "--spec",
            str(EXAMPLES / "late-readings.spec.json"),
            "--input",
            str(EXAMPLES / "late-readings.input.jsonl"),
        ],
        cwd=ROOT,
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (EXAMPLES / "late-readings.output.jsonl").read_bytes()
    assert done.stderr.decode().strip().endswith("replay: 5 emissions")


def run(tmp_path: Path, spec: object, lines: list[str]) -> tuple[int, list[dict[str, object]]]:
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    input_path = tmp_path / "in.jsonl"
    input_path.write_text("".join(line + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    code = main(
        ["replay", "--spec", str(spec_path), "--input", str(input_path), "--output", str(out)]
    )
    emitted = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return code, emitted


COUNT_5S = {
    "key": "id",
    "timestamp": "ts",
    "watermark": {"type": "none"},
    "assigner": {"type": "tumbling", "size_ms": 5000},
    "function": {"type": "count"},
}


def test_watermark_lines_fire_in_place_and_the_end_of_input_fires_the_rest(
    tmp_path: Path,
) -> None:
    code, emitted = run(
        tmp_path,
        COUNT_5S,
        [
            '{"record": {"id": "a", "ts": 1000}}',
            "",
            '{"watermark": 4999}',
            '{"record": {"id": "a", "ts": 3000}}',
            '{"record": {"id": "b", "ts": 6000}}',
            '{"watermark": 100}',
        ],
    )
    assert code == 0
    assert [(e["key"], e["value"]["window_start_ms"], e["value"]["value"]) for e in emitted] == [
        ("a", 0, 1),  # fired by the watermark line; the reading at 3000 is then late, dropped
        ("b", 5000, 1),  # fired by the end of input; the watermark 100 changed nothing
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(
            {"assigner": {"type": "tumbling", "size_ms": 0}}, "assigner.size_ms:", id="size-0"
        ),
        pytest.param(
            {"assigner": {"type": "tumbling", "size_ms": 10, "offset_ms": 10}},
            "assigner.offset_ms: abs(offset_ms) must be smaller than size_ms",
            id="offset-too-big",
        ),
        pytest.param(
            {"assigner": {"type": "hopping", "size_ms": 10}},
            "assigner: Input tag 'hopping'",
            id="unknown-assigner",
        ),
        pytest.param(
            {"function": {"type": "avg"}},
            "function.field: function 'avg' needs",
            id="avg-without-field",
        ),
        pytest.param(
            {"function": {"type": "median", "field": "x"}}, "function.type:", id="unknown-function"
        ),
        pytest.param({"allowed_lateness_ms": -1}, "allowed_lateness_ms:", id="negative-lateness"),
        pytest.param({"windw": 1}, "windw: Extra inputs are not permitted", id="typo-in-a-key"),
        pytest.param(
            {"trigger": {"type": "purging", "trigger": {"type": "count"}}},
            "trigger.trigger.count: Field required",
            id="nested-trigger-missing-count",
        ),
        pytest.param(
            {"watermark": {"type": "bounded_out_of_orderness"}},
            "watermark.bound_ms: Field required",
            id="no-bound",
        ),
        pytest.param(
            {"evictor": {"type": "count", "max_count": 0}},
            "evictor.max_count:",
            id="evictor-max-count-0",
        ),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_field(
    change: dict[str, object], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, emitted = run(tmp_path, {**COUNT_5S, **change}, ['{"record": {"id": "a", "ts": 1}}'])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert err.startswith("eddy: spec ")
    assert message in err
    assert emitted == []


def test_a_spec_that_is_not_json_or_missing_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["replay", "--spec", str(bad), "--input", str(bad)]) == 2
    assert main(["replay", "--spec", str(tmp_path / "none.json"), "--input", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"eddy: spec {bad} is not JSON")
    assert err[1].startswith("eddy: cannot read spec")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        pytest.param("{oops", "line 2: not JSON", id="not-json"),
        pytest.param(
            '{"record": {"id": "a"}}', "line 2: the record has no field 'ts'", id="no-timestamp"
        ),
        pytest.param('{"record": {"ts": 5}}', "line 2: the record has no field 'id'", id="no-key"),
        pytest.param(
            '{"record": {"id": "a", "ts": "5"}}',
            "line 2: field 'ts' is '5', not integer",
            id="string-ts",
        ),
        pytest.param(
            '{"record": {"id": "a", "ts": 5.5}}', "line 2: field 'ts' is 5.5", id="float-ts"
        ),
        pytest.param(
            '{"record": [1, 2]}', "line 2: a record must be a JSON object", id="record-not-object"
        ),
        pytest.param(
            '{"watermark": 1.5}', "line 2: 'watermark' must be integer milliseconds", id="float-wm"
        ),
        pytest.param(
            '{"processing_time": "soon"}', "line 2: 'processing_time' must be integer", id="bad-pt"
        ),
        pytest.param('{"wm": 5}', 'line 2: unknown line {"wm": ...}', id="unknown-kind"),
        pytest.param('{"record": {}, "watermark": 1}', "line 2: expected one of", id="two-keys"),
    ],
)
def test_a_bad_input_line_names_its_line_number(
    line: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = run(tmp_path, COUNT_5S, ['{"record": {"id": "a", "ts": 1}}', line])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert message in err


def test_a_record_the_function_cannot_use_is_one_line_naming_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = {**COUNT_5S, "function": {"type": "sum", "field": "t"}}
    code, _ = run(
        tmp_path,
        spec,
        [
            '{"record": {"id": "a", "ts": 1, "t": 1}}',
            '{"record": {"id": "a", "ts": 2, "t": "hot"}}',
        ],
    )
    assert code == 2
    assert (
        "eddy: line 2: the window function cannot use a record: unsupported operand"
        in capsys.readouterr().err
    )
    # With an evictor the function runs when the window fires: at the end of input here.
    spec = {**spec, "evictor": {"type": "count", "max_count": 5}}
    code, _ = run(
        tmp_path,
        spec,
        [
            '{"record": {"id": "a", "ts": 1, "t": 1}}',
            '{"record": {"id": "a", "ts": 2, "t": "hot"}}',
        ],
    )
    assert code == 2
    assert (
        "eddy: at the end of input: the window function cannot use a record"
        in capsys.readouterr().err
    )


def test_a_missing_input_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(COUNT_5S))
    assert main(["replay", "--spec", str(spec), "--input", str(tmp_path / "nope.jsonl")]) == 2
    assert "cannot read or write" in capsys.readouterr().err


def test_a_process_spec_with_an_unknown_function_is_one_clear_line(tmp_path: Path) -> None:
    spec = tmp_path / "bad.spec.json"
    spec.write_text(
        '{"kind": "process", "function": "eddy.examples.sensor_functions:Nope",'
        ' "inputs": [{"name": "in", "key": "k"}]}'
    )
    done = subprocess.run(
        [sys.executable, "-m", "eddy", "replay", "--spec", str(spec), "--input", str(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"eddy: spec {spec}: function: 'eddy.examples.sensor_functions' has no 'Nope'"
    ]


def test_records_of_an_input_the_spec_does_not_have_are_rejected(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text('{"record": {"k": "a", "n": 1}, "input": "middle"}\n')
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "eddy",
            "replay",
            "--spec",
            str(EXAMPLES / "join-002.spec.json"),
            "--input",
            str(data),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "line 1: unknown input 'middle'; the spec has left, right" in done.stderr
