"""Brokers on hosts of their own: what each node's configuration says (no network)."""

from __future__ import annotations

import pytest

from eddy.errors import LocalKafkaError
from tools.localkafka.cluster import Brokers
from tools.localkafka.config import KafkaVersion

HOSTS = ["10.231.7.1", "10.231.7.2", "10.231.7.3"]
NETNS = ["ef0007-b1", "ef0007-b2", "ef0007-b3"]


def properties(brokers: Brokers, node: int) -> dict[str, str]:
    lines = brokers.render_properties(node).splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


@pytest.mark.parametrize("version", ["3.9.2", "4.2.1"])
def test_each_node_listens_on_and_advertises_its_own_address(version: str) -> None:
    brokers = Brokers(KafkaVersion.parse(version), 3, hosts=HOSTS, netns=NETNS, name="fleet/ef0007")
    assert brokers.bootstrap == "10.231.7.1:9092,10.231.7.2:9092,10.231.7.3:9092"
    props = properties(brokers, 2)
    assert props["listeners"] == "PLAINTEXT://10.231.7.2:9092,CONTROLLER://10.231.7.2:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://10.231.7.2:9092"
    assert props["controller.quorum.voters"] == (
        "1@10.231.7.1:9093,2@10.231.7.2:9093,3@10.231.7.3:9093"
    )
    assert props["min.insync.replicas"] == "2"
    assert props["default.replication.factor"] == "3"
    # One folder per run; the jars are shared by every fleet's brokers.
    assert brokers.home.parts[-3:] == ("kafka-cluster", "fleet", "ef0007")
    assert brokers.jars.parts[-3:] == ("kafka-cluster", "fleet", version)


def test_loopback_clusters_are_as_they_were() -> None:
    brokers = Brokers(KafkaVersion.parse("3.9.2"), 3, base_port=29092)
    assert brokers.bootstrap == "127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094"
    assert brokers.jars == brokers.home / "3.9.2"


def test_hosts_must_match_the_brokers() -> None:
    with pytest.raises(LocalKafkaError, match="a cluster of 3 brokers needs 3 hosts and netns"):
        Brokers(KafkaVersion.parse("3.9.2"), 3, hosts=HOSTS[:2], netns=NETNS[:2])
