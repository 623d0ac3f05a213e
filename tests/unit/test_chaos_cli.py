"""``python -m tools chaos``: options parse, and bad ones fail in one line."""

from __future__ import annotations

import pytest

from tools.cli import build_parser, main


def test_the_chaos_command_parses_the_long_run_and_latency_options() -> None:
    args = build_parser().parse_args(["chaos", "--seeds", "20", "--faults", "kill,zombie"])
    assert (args.mode, args.seeds, args.faults) == ("run", 20, "kill,zombie")
    latency = build_parser().parse_args(["chaos", "latency", "--commit-interval-ms", "100", "1000"])
    assert (latency.mode, latency.commit_interval_ms) == ("latency", [100, 1000])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["chaos", "--seed", "1", "--records", "5"], "--records must be >= 100"),
        (["chaos", "--seed", "1", "--faults", "kill,nap"], "unknown fault kind 'nap'"),
        (["chaos", "--commit-interval-ms", "100", "1000"], "one --commit-interval-ms"),
        (["chaos", "--replay", "/nonexistent/schedule.json"], "cannot read"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_code_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1
    assert "Traceback" not in err
