"""Misconfiguration fails at start with a message that says what to set."""

from __future__ import annotations

import os

import pytest

from service.errors import ConfigError
from service.settings import Guarantee, load_settings


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


def test_topics_must_differ() -> None:
    with pytest.raises(ConfigError, match="must differ"):
        load_settings(late_topic="sensor-readings")
