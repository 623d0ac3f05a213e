"""Eddy against a broker that only speaks SASL/SCRAM over TLS: the worker and the
simulator work with the EDDY_SECURITY_PROTOCOL/EDDY_SASL_*/EDDY_SSL_CAFILE settings,
and clients without the right credentials or CA are refused.

The broker is a private one (tests/support/secure_broker.py) on free ports; the
shared local broker on 9092 is not touched.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from eddy.kafka_clients import connection_kwargs
from eddy.settings import Settings, load_settings
from tests.support.kafka import read_all, unique_settings
from tests.support.processes import WorkerProcess, settings_env
from tests.support.secure_broker import MECHANISM, SecureBroker, secure_broker

pytestmark = pytest.mark.integration

USER, PASSWORD = "eddy", "eddy-scram-password"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    with secure_broker(tmp_path_factory.mktemp("secure-kafka"), {USER: PASSWORD}) as running:
        yield running


def secure(broker: SecureBroker, tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "bootstrap_servers": broker.bootstrap,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": MECHANISM,
        "sasl_username": USER,
        "sasl_password": PASSWORD,
        "ssl_cafile": broker.cafile,
        "replication_factor": 1,
        "partitions": 3,
    }
    return unique_settings(tmp_path, **(values | overrides))


async def refusal(settings: Settings) -> str | None:
    """None if the client got metadata from the broker, else why not."""
    admin = AIOKafkaAdminClient(**connection_kwargs(settings), request_timeout_ms=5_000)
    try:
        async with asyncio.timeout(20):
            await admin.start()
            await admin.list_topics()
        return None
    except Exception as exc:
        return repr(exc)
    finally:
        await admin.close()


async def test_clients_without_the_credentials_or_the_ca_are_refused(
    broker: SecureBroker, tmp_path: Path
) -> None:
    good = secure(broker, tmp_path)
    for _ in range(30):  # the port opens a moment before SCRAM users are loaded
        if await refusal(good) is None:
            break
        await asyncio.sleep(1)
    assert await refusal(good) is None
    plain = load_settings(bootstrap_servers=broker.bootstrap)
    tls_only = load_settings(
        bootstrap_servers=broker.bootstrap, security_protocol="SSL", ssl_cafile=broker.cafile
    )
    wrong_password = secure(broker, tmp_path, sasl_password="not-the-password")
    unknown_ca = secure(broker, tmp_path, ssl_cafile=None)  # system CAs: not ours
    for name, settings in [
        ("plaintext", plain),
        ("TLS without SASL", tls_only),
        ("wrong password", wrong_password),
        ("untrusted CA", unknown_ca),
    ]:
        assert await refusal(settings) is not None, f"{name} client was let in"


async def test_a_worker_and_the_simulator_run_over_sasl_ssl(
    broker: SecureBroker, tmp_path: Path
) -> None:
    settings = secure(broker, tmp_path)
    worker = WorkerProcess(settings, tmp_path / "worker.log")
    try:
        worker.wait_ready(timeout_s=120)
        simulate = [sys.executable, "-m", "tools", "simulate", "--count", "600", "--fast"]
        simulate += ["--sensors", "5", "--no-thresholds", "--seed", "7"]
        result = await asyncio.to_thread(
            subprocess.run,
            simulate,
            env=settings_env(settings),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        # The worker's transactions committed results the secure consumer can read.
        averages = await read_all(
            settings, settings.topic("sensor-averages"), min_records=1, timeout_s=60
        )
        assert averages, worker.log()
        status = worker.status()["stages"]["sensor_averages"]
        assert status["records_in"] >= 600
        assert status["partitions"] == [0, 1, 2]
    finally:
        exit_code = worker.stop()
    assert exit_code == 0, worker.log()  # a clean stop: committed and left the group
    assert PASSWORD not in worker.log(), "the SASL password was logged"
