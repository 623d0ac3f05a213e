"""Exactly-once under faults, checked the way docs/chaos.md describes.

(a) a short exactly-once run with every fault kind against every agent of the
reference app (the checker, sensor_averages and the other reference agents,
hashtag_counts' repartition stage included) must come out clean, with aborted
transactions left behind (so the faults did land);
(b) the negative control: the same harness in at-least-once mode must find
duplicates, or the checks prove nothing; (c) the long run (``make chaos``), 20
seeds, is marked slow. Each run leaves ``.eddy/chaos/<run-id>/`` with its
``schedule.json`` (replay it with ``python -m tools chaos --replay``), its
``results.json`` and one log per worker.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from tools.chaos.report import RunResult, render
from tools.chaos.runner import run_chaos
from tools.chaos.schedule import ALL_KINDS, FaultKind, RunConfig, make_schedule
from tools.chaos.verify_reference import AGENTS as REFERENCE

pytestmark = pytest.mark.e2e


async def _run(config: RunConfig, expect_duplicates: bool = False) -> tuple[RunResult, str]:
    out = io.StringIO()
    console = Console(file=out, width=140, force_terminal=False)
    result = await run_chaos(
        make_schedule(config), expect_duplicates=expect_duplicates, console=console
    )
    render(result, console)
    return result, out.getvalue()


@pytest.mark.timeout(900)
async def test_exactly_once_survives_every_fault_kind() -> None:
    # ~250 records/s, so every kill -9 finds transactions with records in them.
    config = RunConfig(
        seed=101,
        records=5_000,
        keys=200,
        readings=3_000,
        sensors=20,
        kinds=ALL_KINDS,
        duration_s=32.0,
        # Two windows per checkpoint: the watermarks that close several at once are
        # fired over several checkpoints, and the faults land between them too.
        window_firings_per_checkpoint=2,
    )
    result, table = await _run(config)
    assert result.clean, table
    assert {f.kind for f in result.faults} == {k.value for k in ALL_KINDS}, table
    assert all(f.landed for f in result.faults), table  # restore_kill hit a restore
    assert result.records["eos_checker"] >= 5_000
    assert result.records["sensor_averages"] >= 3_000
    for agent in REFERENCE:  # each checked, with input of its own
        assert result.records[agent] > 0, agent
        assert any(c.agent == agent for c in result.checks), agent


# make chaos runs this negative control (a minute of make test's thirty;
# tests/unit/test_chaos_verify.py shows the checks fail on duplicates).
@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_at_least_once_shows_duplicates_so_the_checker_can_see_them() -> None:
    config = RunConfig(
        seed=102,
        records=6_000,
        keys=100,
        readings=1_000,
        kinds=(FaultKind.KILL,),
        faults_per_kind=3,
        guarantee="at_least_once",
        # A wide gap between sending outputs and committing offsets: a kill then
        # always leaves sent-but-uncommitted records, so the control cannot pass
        # (or fail) by the luck of where a kill lands.
        commit_interval_ms=2_000,
        duration_s=16.0,
    )
    result, table = await _run(config, expect_duplicates=True)
    assert result.duplicates > 0, table
    assert result.passed, table
    assert result.total("lost") == 0, table  # at-least-once may repeat, never lose


@pytest.mark.slow
@pytest.mark.timeout(4 * 3_600)
async def test_twenty_seeds_of_every_fault_kind() -> None:
    """What ``make chaos`` runs (as ``python -m tools chaos --seeds 20``)."""
    failed = []
    for seed in range(1, 21):
        result, table = await _run(RunConfig(seed=seed))
        if not result.clean:
            failed.append(table)
    assert not failed, "\n\n".join(failed)
