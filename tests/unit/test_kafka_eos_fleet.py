"""``python -m tools eos-kafka --fleet``'s plan, without a fleet: where its network
faults fall among the bounces, and the one-line refusals of arguments that cannot
make a run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tools.kafkaeos.run import RunConfig, plan
from tools.localkafka.config import KafkaVersion

REPO = Path(__file__).resolve().parents[2]


def _config(**kwargs: int) -> RunConfig:
    return RunConfig(version=KafkaVersion.parse("3.9.2"), bootstrap="b:9092", **kwargs)  # type: ignore[arg-type]


def test_the_fleet_step_cuts_a_worker_then_isolates_a_leader_among_six_bounces() -> None:
    faults = plan(_config(worker_cuts=1, leader_isolations=1))
    assert faults == ["hard", "clean", "cut", "hard", "clean", "isolate", "hard", "clean"]


def test_without_network_faults_the_bounces_are_as_before() -> None:
    assert plan(_config()) == ["hard", "clean"] * 3
    assert plan(_config(leader_kills=2)) == [
        "hard", "leader", "clean", "leader", "hard", "clean", "hard", "clean",
    ]  # fmt: skip


def test_network_faults_alone_still_happen_when_nothing_is_bounced() -> None:
    assert plan(_config(bounces=0, worker_cuts=2, leader_isolations=1)) == [
        "cut",
        "cut",
        "isolate",
    ]


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--worker-cuts", "1"], "--worker-cuts and --leader-isolations cut links"),
        (["--leader-isolations", "1"], "add --fleet"),
        (["--fleet", "--brokers", "3"], "--fleet brings its own 3 brokers"),
    ],
)
def test_arguments_that_cannot_make_a_run_are_refused_in_one_line(
    argv: list[str], reason: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tools", "eos-kafka", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert reason in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
