"""Public answers name stages and agents: every stage a worker runs, the ones
Eddy adds included, says which agent it is part of."""

from __future__ import annotations

from pathlib import Path

from eddy.worker import Worker
from tests.support.kafka import unique_settings


def test_every_stage_says_which_agent_it_is_part_of(tmp_path: Path) -> None:
    settings = unique_settings(tmp_path, agents=("hashtag_counts", "vehicle_speed"))
    worker = Worker(settings)
    assert worker.agents()["hashtag_counts"] == ["hashtag_counts.repartition", "hashtag_counts"]
    assert worker.agent_of("hashtag_counts.repartition") == "hashtag_counts"
    assert worker.agent_of("hashtag_counts") == "hashtag_counts"
    # A join's input re-keyed at start (inputs not co-partitioned) is the join's agent's.
    rekey = f"vehicle_speed.rekey.{settings.topic('obd')}"
    assert worker.agent_of(rekey) == "vehicle_speed"


def test_a_bare_stage_is_its_own_agent(tmp_path: Path) -> None:
    stages = Worker(unique_settings(tmp_path, agents=("sensor_averages",))).built
    assert stages is not None
    bare = Worker(unique_settings(tmp_path), stages.stages)
    assert bare.agent_of("sensor_averages") == "sensor_averages"
