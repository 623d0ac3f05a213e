"""A window definition may put one record in at most 1,000 windows: a sliding
window of ``size_ms`` every ``slide_ms`` puts it in ``ceil(size / slide)``, each a
state update and a timer. A larger ratio is refused where the definition is
made, with what to change: by a replay spec (naming the field), by the event-time
core, and by an app's agent when the app is built (naming the agent, one line,
no traceback), before any record is read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eddy import App, BoundedOutOfOrderness, Count, Sliding, TestDriver, Topic, Tumbling
from eddy.app.plan import PlanError
from eddy.eventtime import WindowSpec
from eddy.eventtime.definition import MAX_WINDOWS_PER_ELEMENT
from eddy.eventtime.joins import window_join

REPLAY = [sys.executable, "-m", "eddy", "replay"]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def refusal(size_ms: int, slide_ms: int) -> str:
    return (
        f"a sliding window of size_ms={size_ms} every slide_ms={slide_ms} puts each record "
        f"in {ceil_div(size_ms, slide_ms)} windows, more than 1000: raise slide_ms to at "
        f"least {ceil_div(size_ms, 1000)}, or lower size_ms to at most {slide_ms * 1000}"
    )


@given(
    size_ms=st.integers(1, 10**13),
    slide_ms=st.integers(1, 10**9),
    timestamp_ms=st.integers(-(2**53), 2**53),
)
def test_a_definition_puts_a_record_in_at_most_the_bound_of_windows(
    size_ms: int, slide_ms: int, timestamp_ms: int
) -> None:
    assert MAX_WINDOWS_PER_ELEMENT == 1_000
    assigner = Sliding(size_ms, slide_ms)
    if ceil_div(size_ms, slide_ms) > MAX_WINDOWS_PER_ELEMENT:
        with pytest.raises(ValueError, match=r"^a sliding window of") as refused:
            WindowSpec(assigner, Count())
        assert str(refused.value) == refusal(size_ms, slide_ms)
        # Each way out the message offers is accepted.
        WindowSpec(Sliding(size_ms, ceil_div(size_ms, MAX_WINDOWS_PER_ELEMENT)), Count())
        WindowSpec(Sliding(slide_ms * MAX_WINDOWS_PER_ELEMENT, slide_ms), Count())
    else:
        WindowSpec(assigner, Count())
        assert len(assigner.assign(timestamp_ms)) <= MAX_WINDOWS_PER_ELEMENT


def test_the_bound_holds_for_a_window_join_and_spares_other_assigners() -> None:
    with pytest.raises(ValueError, match="puts each record in 1001 windows"):
        window_join(Sliding(1001, 1), lambda a, b: (a, b))
    WindowSpec(Tumbling(10**12), Count())  # one window per record, however long


def spec_replay(tmp_path: Path, spec: object, source: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return subprocess.run(
        [*REPLAY, "--spec", str(path), "--input", source],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


SLIDING = {
    "key": "id",
    "timestamp": "ts",
    "watermark": {"type": "none"},
    "assigner": {"type": "sliding", "size_ms": 1_000_000_000, "slide_ms": 1},
    "function": {"type": "count"},
}


@pytest.mark.parametrize(
    "spec",
    [SLIDING, {**SLIDING, "inputs": ["left", "right"], "function": {"type": "join"}}],
    ids=["window", "window-join"],
)
def test_a_replay_spec_with_too_many_windows_per_record_is_refused_before_any_input(
    tmp_path: Path, spec: dict[str, object]
) -> None:
    done = spec_replay(tmp_path, spec, "/dev/zero")  # never read
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"eddy: spec {tmp_path / 'spec.json'}: assigner: {refusal(1_000_000_000, 1)}"
    )


def test_a_replay_spec_at_the_bound_runs_each_record_in_its_1000_windows(
    tmp_path: Path,
) -> None:
    spec = {**SLIDING, "assigner": {"type": "sliding", "size_ms": 1000, "slide_ms": 1}}
    source = tmp_path / "in.jsonl"
    source.write_text('{"record": {"id": "a", "ts": 5000}}\n')
    done = spec_replay(tmp_path, spec, str(source))
    assert done.returncode == 0, done.stderr
    windows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(windows) == 1000
    assert {(w["value"]["window_start_ms"], w["value"]["value"]) for w in windows} == {
        (start, 1) for start in range(4001, 5001)
    }


READINGS = Topic("readings", key="id", timestamp="timestamp_ms")
OTHERS = Topic("others", key="id", timestamp="timestamp_ms")


def sliding_app(join: bool) -> App:
    app = App("slides")
    exact = BoundedOutOfOrderness(bound_ms=0)
    stream = app.stream(READINGS, name="counts", watermark=exact)
    if join:
        other = app.stream(OTHERS, watermark=exact)
        stream.window_join(other, Sliding(10**9, 1), join=lambda a, b: a).to(Topic("pairs"))
    else:
        stream.window(Sliding(size_ms=10**9, slide_ms=1)).aggregate(Count()).to(Topic("out"))
    return app


@pytest.mark.parametrize("join", [False, True], ids=["window", "window-join"])
def test_an_agent_with_too_many_windows_per_record_is_refused_when_the_app_is_built(
    join: bool,
) -> None:
    with pytest.raises(PlanError) as refused:
        TestDriver(sliding_app(join), agents=["counts"])
    assert str(refused.value) == f"agent counts: {refusal(10**9, 1)}"


APP_MODULE = """\
from eddy import App, BoundedOutOfOrderness, Count, Sliding, Topic

app = App("slides")


@app.define()
def counts() -> None:
    (
        app.stream(Topic("readings", key="id", timestamp="timestamp_ms"),
                   watermark=BoundedOutOfOrderness(bound_ms=0))
        .window(Sliding(size_ms=86_400_000, slide_ms=1_000))
        .aggregate(Count())
        .to(Topic("counts"))
    )
"""


def test_an_agent_replay_of_such_an_app_is_one_line_naming_the_agent(tmp_path: Path) -> None:
    (tmp_path / "slides.py").write_text(APP_MODULE)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    done = subprocess.run(
        [*REPLAY, "--app", "slides:app", "--agent", "counts", "--input", "/dev/zero"],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "eddy: agent counts: a sliding window of size_ms=86400000 every slide_ms=1000 puts "
        "each record in 86400 windows, more than 1000: raise slide_ms to at least 86400, "
        "or lower size_ms to at most 1000000"
    )
