"""An agent may read in a consumer group it names (``group_id``), as an app that
takes over another framework's application id must; the others keep
``<app id>.<stage>``."""

from __future__ import annotations

from pathlib import Path

import pytest

from eddy import App, BoundedOutOfOrderness, ConfigError, Context, Topic, ValueState
from eddy.runtime.assignor import EddyAssignor
from eddy.runtime.clients import StageClients
from tests.support.kafka import unique_settings

CLICKS = Topic("clicks", key="user")
COUNTS = Topic("counts")
SEEN = ValueState("seen", int)


def app_with_group(group_id: str | None) -> App:
    app = App("clicks")

    @app.agent(CLICKS, outputs=[COUNTS], states=[SEEN], group_id=group_id)
    def counted(click: object, ctx: Context) -> None:
        ctx.send(COUNTS, 1)

    watermark = BoundedOutOfOrderness(bound_ms=1_000)
    app.stream(CLICKS, name="rekeyed", watermark=watermark, group_id=group_id).key_by(
        lambda c: "all"
    ).process(lambda click, ctx: None, states=[SEEN]).to(COUNTS)
    return app


def test_every_stage_of_an_agent_reads_in_the_group_it_names(tmp_path: Path) -> None:
    settings = unique_settings(tmp_path, agents=None)
    built = app_with_group("LegacyApp").build(settings)
    assert sorted(s.name for s in built.stages) == ["counted", "rekeyed", "rekeyed.repartition"]
    assert {built.group_id_of(s.name) for s in built.stages} == {"LegacyApp"}


def test_without_a_group_id_each_stage_reads_in_its_own_group(tmp_path: Path) -> None:
    settings = unique_settings(tmp_path, agents=None)
    built = app_with_group(None).build(settings)
    groups = [built.group_id_of(s.name) for s in built.stages]
    assert groups == [f"{settings.app_id}.{s.name}" for s in built.stages]


def test_the_stage_consumer_joins_the_named_group(tmp_path: Path) -> None:
    settings = unique_settings(tmp_path, agents=None)
    built = app_with_group("LegacyApp").build(settings)
    stage = built.stages[0]
    assignor = EddyAssignor(0, lambda: (frozenset(), {}))
    clients = StageClients(stage, settings, assignor, built.group_id_of(stage.name))
    assert clients.group_id == "LegacyApp"


@pytest.mark.parametrize("bad", ["", "has space", "x" * 201, "semi;colon"])
def test_a_group_id_kafka_would_not_take_is_refused_when_declared(bad: str) -> None:
    with pytest.raises(ConfigError, match="group id"):
        App("a").stream(CLICKS, name="a", group_id=bad)
    with pytest.raises(ConfigError, match="group id"):
        App("a").agent(CLICKS, group_id=bad)
