"""Kafka's own exactly-once system test with Eddy as the application, short:
Kafka Streams' ``EosTestDriver`` produces while three Eddy workers process
``data`` in group ``EosTest``; one is killed with SIGKILL mid-run; then Kafka's
verifier (``verify``, ``verify-complex``) must print ALL-RECORDS-DELIVERED.
``make eos-kafka`` is the long version (docs/chaos.md)."""

from __future__ import annotations

import pytest

from tools import localkafka
from tools.kafkaeos.run import EosKafkaRun, RunConfig
from tools.localkafka.config import BOOTSTRAP, KafkaVersion

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(600)
async def test_kafkas_verifier_finds_every_record_once_after_a_kill() -> None:
    version = KafkaVersion.parse(localkafka.status().version)
    config = RunConfig(version=version, bootstrap=BOOTSTRAP, duration_s=20.0, bounces=1)
    result = await EosKafkaRun(config).execute(say=lambda _: None)
    report = "\n".join(result.summary())
    assert result.hard == 1, report
    assert result.produced > 1_000, report
    assert [(v.command, v.line) for v in result.verdicts] == [
        ("verify", "ALL-RECORDS-DELIVERED"),
        ("verify-complex", "ALL-RECORDS-DELIVERED"),
    ], report
    assert result.passed, report
