"""The pieces of Kafka's exactly-once system test run against Eddy, without a
broker: the app's outputs, Kafka's binary serdes, the verdict read from the
verifier's output, the cluster's broker configuration."""

from __future__ import annotations

import pytest

from eddy import EncodeError, TestDriver, Topic
from tools.kafkaeos.app import CNT, DATA, ECHO, MAX, MIN, SUM, app
from tools.kafkaeos.run import verdict_of
from tools.kafkaeos.serdes import KafkaInteger, KafkaLong
from tools.localkafka.cluster import Brokers
from tools.localkafka.config import KafkaVersion


def test_kafka_integers_and_longs_are_big_endian_twos_complement() -> None:
    # What Java's IntegerSerializer and LongSerializer write for these values.
    assert KafkaInteger().encode(-2) == b"\xff\xff\xff\xfe"
    assert KafkaLong().encode(258) == b"\x00\x00\x00\x00\x00\x00\x01\x02"
    assert KafkaInteger().decode(b"\x00\x00\x27\x0f") == 9999
    with pytest.raises(EncodeError):
        KafkaInteger().encode(2**31)


def test_each_record_is_echoed_and_its_keys_running_aggregates_follow_it() -> None:
    driver = TestDriver(app)
    for key, value in [("1", 5), ("2", 7), ("1", 3), ("1", 9), ("2", -4)]:
        driver.send(DATA, value, key=key)

    def values(topic: Topic[int]) -> list[tuple[str, int]]:
        return [(o.key, o.value) for o in driver.read(topic)]

    assert values(ECHO) == [("1", 5), ("2", 7), ("1", 3), ("1", 9), ("2", -4)]
    assert values(MIN) == [("1", 5), ("2", 7), ("1", 3), ("1", 3), ("2", -4)]
    assert values(SUM) == [("1", 5), ("2", 7), ("1", 8), ("1", 17), ("2", 3)]
    assert values(MAX) == [("1", 5), ("2", 7), ("1", 5), ("1", 9), ("2", 7)]
    assert values(CNT) == [("1", 1), ("2", 1), ("1", 2), ("1", 3), ("2", 2)]


def test_a_record_without_a_kafka_key_is_dead_lettered_not_counted() -> None:
    driver = TestDriver(app)
    driver.send(DATA, b"\x00\x00\x00\x01")
    assert driver.read(ECHO) == []
    assert "no key" in driver.dead_letters()[0].reason


def test_kafka_key_and_a_value_key_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="not both"):
        Topic("data", key="user", kafka_key=True)


def test_the_verifiers_delivered_line_is_a_pass_and_anything_else_a_failure() -> None:
    passed = verdict_of("verify", "read end offset: {}\nALL-RECORDS-DELIVERED\n", 3.0)
    assert passed.passed
    assert passed.line == "ALL-RECORDS-DELIVERED"
    failed = verdict_of("verify", "java.lang.RuntimeException: Result verification failed\n", 1)
    assert not failed.passed
    assert "Result verification failed" in failed.line
    assert not verdict_of("verify-complex", "FAILED\n", 1.0).passed
    duplicated = verdict_of(
        "verify", "echo-0 with 5, data-0 with 5\necho-1 with 7, data-1 with 6\n", 1
    )
    assert not duplicated.passed
    assert duplicated.line == "echo-1 with 7, data-1 with 6"
    assert not verdict_of("verify", "ALL-RECORDS-DELIVERED\nFAILED\n", 1.0).passed


@pytest.mark.parametrize("version", ["3.9.2", "4.2.1"])
def test_a_three_broker_cluster_replicates_everything_three_times(version: str) -> None:
    brokers = Brokers(KafkaVersion.parse(version), 3, base_port=29092)
    assert brokers.bootstrap == "127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094"
    props = dict(
        line.split("=", 1)
        for line in brokers.render_properties(2).splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert props["node.id"] == "2"
    assert props["controller.quorum.voters"] == (
        "1@127.0.0.1:29192,2@127.0.0.1:29193,3@127.0.0.1:29194"
    )
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:29093,CONTROLLER://127.0.0.1:29193"
    for name in ("default.replication.factor", "transaction.state.log.replication.factor"):
        assert props[name] == "3"
    assert props["min.insync.replicas"] == props["transaction.state.log.min.isr"] == "2"
    assert str(brokers.home).endswith("kafka-cluster/3x29092")
