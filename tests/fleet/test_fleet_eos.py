"""Kafka's own exactly-once verifier on a fleet, short: three brokers and three Eddy
workers on hosts of their own (network namespaces), Kafka's driver producing while
one worker's host is cut from the brokers past its transaction timeout and the
broker leading a partition of ``echo`` is cut from the other brokers; then
``verify`` and ``verify-complex`` must both print ALL-RECORDS-DELIVERED.
``make eos-kafka`` runs the long version and Kafka Streams on the same schedule.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tools.fleet.hosts import Fleet
from tools.kafkaeos.network import TRANSACTION_TIMEOUT_MS
from tools.kafkaeos.run import EosKafkaRun, RunConfig

pytestmark = pytest.mark.slow


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    with Fleet() as fleet:
        fleet.start()
        yield fleet


@pytest.mark.timeout(600)
async def test_kafkas_verifier_finds_every_record_once_after_a_cut_and_an_isolation(
    fleet: Fleet,
) -> None:
    config = RunConfig(
        version=fleet.brokers.version,
        bootstrap=fleet.bootstrap,
        replication=3,
        duration_s=30.0,
        bounces=0,
        fleet=True,
        worker_cuts=1,
        leader_isolations=1,
    )
    result = await EosKafkaRun(config, fleet=fleet).execute(say=lambda _: None)
    report = "\n".join(result.summary())
    cut, isolation = result.network
    assert "cut from the brokers" in cut.what, report
    assert cut.seconds > TRANSACTION_TIMEOUT_MS / 1000, report
    assert "cut from the other brokers" in isolation.what, report
    assert result.produced > 1_000, report
    assert [(v.command, v.line) for v in result.verdicts] == [
        ("verify", "ALL-RECORDS-DELIVERED"),
        ("verify-complex", "ALL-RECORDS-DELIVERED"),
    ], report
    assert result.passed, report
