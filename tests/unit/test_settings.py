"""Misconfiguration fails at start with a message that says what to set."""

from __future__ import annotations

import os

import pytest
from pydantic import Field

from eddy import AgentSettings, App, Topic
from eddy.errors import ConfigError
from eddy.settings import Guarantee, load_settings


def test_defaults_are_exactly_once_on_the_local_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("EDDY_")]:
        monkeypatch.delenv(name)
    settings = load_settings()
    assert settings.processing_guarantee is Guarantee.EXACTLY_ONCE
    assert settings.exactly_once
    assert settings.uses_local_broker


def test_environment_variables_with_the_prefix_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDDY_PROCESSING_GUARANTEE", "at_least_once")
    monkeypatch.setenv("EDDY_BOOTSTRAP_SERVERS", "kafka-1:9092,kafka-2:9092")
    settings = load_settings()
    assert not settings.exactly_once
    assert not settings.uses_local_broker


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("EDDY_PROCESSING_GUARANTEE", "maybe", "EDDY_PROCESSING_GUARANTEE: Input should be"),
        ("EDDY_COMMIT_INTERVAL_MS", "soon", "EDDY_COMMIT_INTERVAL_MS: Input should be"),
        ("EDDY_BOOTSTRAP_SERVERS", "kafka", "EDDY_BOOTSTRAP_SERVERS: Value error, 'kafka'"),
        ("EDDY_COMMIT_INTERVAL", "5", "did you mean EDDY_COMMIT_INTERVAL_MS?"),
        ("EDDY_API_PORT", "70000", "EDDY_API_PORT: Input should be less than or equal"),
    ],
)
def test_bad_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert message in str(error.value)


class WindowSettings(AgentSettings):
    window_ms: int = Field(60_000, ge=1_000)


class SecretSettings(AgentSettings):
    api_key: str


def _app_with(*classes: type[AgentSettings]) -> App:
    app = App("settings-test")
    clicks = Topic("clicks", key="user")
    for n, cls in enumerate(classes):

        @app.define(name=f"agent_{n}", settings=cls)
        def one(s: AgentSettings) -> None:
            app.stream(clicks).to(Topic("out"))

    return app


def test_an_agents_settings_come_from_its_own_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDDY_WINDOW_MS", "5000")
    app = _app_with(WindowSettings)
    built = app.build(load_settings(app.settings_classes()))
    assert built.agents["agent_0"].settings == WindowSettings(window_ms=5_000)


def test_a_misspelt_agent_setting_is_refused_with_the_closest_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EDDY_WINDOW_M", "5000")
    with pytest.raises(ConfigError, match=r"EDDY_WINDOW_M \(did you mean EDDY_WINDOW_MS\?\)"):
        load_settings(_app_with(WindowSettings).settings_classes())


def test_a_bad_or_missing_agent_setting_names_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EDDY_WINDOW_MS", "5")
    app = _app_with(WindowSettings, SecretSettings)
    with pytest.raises(ConfigError) as error:
        app.build(load_settings(app.settings_classes()))
    assert "EDDY_WINDOW_MS: Input should be greater than or equal to 1000" in str(error.value)
    monkeypatch.setenv("EDDY_WINDOW_MS", "5000")
    with pytest.raises(ConfigError, match="EDDY_API_KEY is required: set it"):
        app.build(load_settings(app.settings_classes()))


def test_an_agent_setting_may_not_take_a_framework_variable() -> None:
    class Clash(AgentSettings):
        partitions: int = 3

    app = _app_with(Clash)
    with pytest.raises(
        ConfigError, match="EDDY_PARTITIONS is declared by Clash and by the framework"
    ):
        app.build(load_settings())
