"""The one place Kafka clients get their servers, TLS and SASL from."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from eddy.errors import ConfigError
from eddy.kafka_clients import connection_kwargs
from eddy.settings import load_settings


def test_plaintext_is_the_default_and_adds_nothing() -> None:
    kwargs = connection_kwargs(load_settings(bootstrap_servers="k:9092"))
    assert kwargs == {
        "bootstrap_servers": "k:9092",
        "security_protocol": "PLAINTEXT",
        # A hung broker's leaderships move; clients must learn of it in seconds.
        "metadata_max_age_ms": 5_000,
    }


def test_sasl_ssl_builds_a_verifying_context_and_scram_credentials() -> None:
    settings = load_settings(
        security_protocol="SASL_SSL", sasl_username="eddy", sasl_password="s3cret"
    )
    kwargs = connection_kwargs(settings)
    assert kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == ("eddy", "s3cret")
    context = kwargs["ssl_context"]
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname
    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize("missing", ["sasl_username", "sasl_password"])
def test_sasl_without_credentials_names_the_variable_to_set(missing: str) -> None:
    values = {"sasl_username": "eddy", "sasl_password": "pw"}
    del values[missing]
    with pytest.raises(ConfigError, match=f"EDDY_{missing.upper()}"):
        load_settings(security_protocol="SASL_PLAINTEXT", **values)


def test_an_unreadable_ca_file_names_eddy_ssl_cafile(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    settings = load_settings(security_protocol="SSL", ssl_cafile=bad)
    with pytest.raises(ConfigError, match="EDDY_SSL_CAFILE"):
        connection_kwargs(settings)
    missing = load_settings(security_protocol="SSL", ssl_cafile=tmp_path / "absent.pem")
    with pytest.raises(ConfigError, match="EDDY_SSL_CAFILE"):
        connection_kwargs(missing)
