"""One replay: a window spec and an agent equal to it, replayed over the same
records, write the same output file byte for byte, flushed alike at the end of the
input (or left open alike with ``--keep-open``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eddy import App, Ascending, Avg, BoundedOutOfOrderness, Count, Topic, Tumbling
from eddy.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "replay"
READINGS = Topic("readings", key="id", timestamp="timestamp_ms")

app = App("parity")


@app.define
def avg_temp_15s() -> None:
    """``avg-temp-15s.spec.json`` as an agent."""
    (
        app.stream(READINGS, watermark=Ascending())
        .window(Tumbling(size_ms=15_000))
        .aggregate(Avg("temperature"))
        .to(Topic("main"))
    )


@app.define
def late_readings() -> None:
    """``late-readings.spec.json`` as an agent: lateness, a late side output."""
    (
        app.stream(READINGS, watermark=BoundedOutOfOrderness(bound_ms=1000))
        .window(Tumbling(size_ms=10_000), allowed_lateness_ms=5000)
        .late_to(Topic("late-readings", key="id"))
        .aggregate(Count())
        .to(Topic("main"))
    )


AGENTS = {"avg-temp-15s": "avg_temp_15s", "late-readings": "late_readings"}


def _replays(name: str, tmp_path: Path, *extra: str) -> tuple[bytes, bytes]:
    """The output files of ``--spec`` and of ``--app`` for example ``name``. The
    agent's input lines are the spec's records, each naming the topic it is on."""
    records = (EXAMPLES / f"{name}.input.jsonl").read_text().splitlines()
    agent_input = tmp_path / "agent.jsonl"
    agent_input.write_text(
        "".join(json.dumps({"topic": "readings", **json.loads(r)}) + "\n" for r in records)
    )
    spec_out, app_out = tmp_path / "spec.out.jsonl", tmp_path / "app.out.jsonl"
    spec = str(EXAMPLES / f"{name}.spec.json")
    source = str(EXAMPLES / f"{name}.input.jsonl")
    assert (
        main(["replay", "--spec", spec, "--input", source, "--output", str(spec_out), *extra]) == 0
    )
    args = ["replay", "--app", f"{__name__}:app", "--agent", AGENTS[name]]
    assert main([*args, "--input", str(agent_input), "--output", str(app_out), *extra]) == 0
    return spec_out.read_bytes(), app_out.read_bytes()


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_spec_and_its_agent_write_identical_files(name: str, tmp_path: Path) -> None:
    from_spec, from_app = _replays(name, tmp_path)
    assert from_spec == from_app
    # Both flushed at the end: the window of the newest record fired, though no
    # watermark reached its end.
    newest_ms = max(
        json.loads(r)["record"]["timestamp_ms"]
        for r in (EXAMPLES / f"{name}.input.jsonl").read_text().splitlines()
    )
    last = json.loads(from_spec.splitlines()[-1])["value"]
    assert last["window_start_ms"] <= newest_ms < last["window_end_ms"]
    assert last["timing"] == "first"


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_keep_open_leaves_the_same_windows_open_in_both(name: str, tmp_path: Path) -> None:
    flushed, _ = _replays(name, tmp_path)
    from_spec, from_app = _replays(name, tmp_path, "--keep-open")
    assert from_spec == from_app
    assert len(from_spec.splitlines()) < len(flushed.splitlines())
    assert flushed.startswith(from_spec)
