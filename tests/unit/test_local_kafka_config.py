"""The local broker's configuration, rendered for Kafka 3.x and 4.x, without network.

A wrong logging jar or log4j property only shows up as a broker that starts
without logs (or not at all) on someone else's machine, so the files are checked
here, where a mistake is cheap.
"""

from __future__ import annotations

import os
import re
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from eddy.errors import LocalKafkaError
from tools import localkafka
from tools.localkafka import config
from tools.localkafka.config import (
    BROKER_JVM,
    DEFAULT_VERSION,
    HOME_ENV,
    VERSION_ENV,
    KafkaVersion,
    Layout,
    configured_version,
    home_dir,
    java_command,
    needs_wipe,
    render_log_config,
    render_pom,
    render_server_properties,
)

POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
V3 = KafkaVersion.parse("3.9.2")
V4 = KafkaVersion.parse("4.1.0")


def dependencies(pom: str, section: str = "m:dependencies") -> dict[str, str]:
    root = ET.fromstring(pom)
    found = root.findall(f"{section}/m:dependency", POM_NS)
    return {
        f"{d.findtext('m:groupId', namespaces=POM_NS)}:"
        f"{d.findtext('m:artifactId', namespaces=POM_NS)}": d.findtext(
            "m:version", namespaces=POM_NS
        )
        or ""
        for d in found
    }


def properties(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line and line[0] != "#")
    return {key.strip(): value.strip() for key, value in pairs}


# --- versions ---------------------------------------------------------------------


def test_default_version_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VERSION_ENV, raising=False)
    assert str(configured_version()) == DEFAULT_VERSION == "3.9.2"


def test_version_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VERSION_ENV, " 4.1.0 ")
    assert configured_version() == KafkaVersion(4, 1, 0)


@pytest.mark.parametrize("garbage", ["banana", "3.9", "3.9.2.1", "v3.9.2", "3.9.x", "4.1.0-rc1"])
def test_garbage_versions_are_rejected_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, garbage: str
) -> None:
    monkeypatch.setenv(VERSION_ENV, garbage)
    with pytest.raises(
        LocalKafkaError, match=re.escape(f"KAFKA_VERSION='{garbage}' is not a Kafka version")
    ):
        configured_version()


@pytest.mark.parametrize("old_or_new", ["2.8.0", "3.2.0", "5.0.0"])
def test_versions_without_kraft_support_are_rejected(old_or_new: str) -> None:
    with pytest.raises(LocalKafkaError, match=re.escape("runs Kafka 3.3 to 4.x")):
        KafkaVersion.parse(old_or_new)


def test_versions_order_numerically_not_as_text() -> None:
    assert KafkaVersion.parse("3.10.0") > KafkaVersion.parse("3.9.2")
    assert not V3.uses_log4j2
    assert V4.uses_log4j2


@pytest.mark.parametrize(
    ("previous", "current", "wipe"),
    [
        (None, "3.9.2", False),  # first start
        ("3.9.2", "3.9.2", False),  # restart keeps data
        ("3.8.1", "3.9.2", False),  # upgrades read older data
        ("3.9.2", "4.1.0", True),  # other major
        ("4.1.0", "3.9.2", True),
        ("4.2.0", "4.1.0", True),  # downgrade: metadata version too new
    ],
)
def test_data_is_wiped_only_when_kafka_cannot_read_it(
    previous: str | None, current: str, wipe: bool
) -> None:
    before = KafkaVersion.parse(previous) if previous else None
    assert needs_wipe(before, KafkaVersion.parse(current)) is wipe


# --- where files live ---------------------------------------------------------------


@pytest.fixture
def no_running_broker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The machine-wide record of the running broker's folder, private to the test."""
    record = tmp_path / "running.home"
    monkeypatch.setattr(config, "RUNNING_HOME", record)
    return record


def test_home_is_kafka_under_eddy_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_running_broker: Path
) -> None:
    monkeypatch.delenv(HOME_ENV, raising=False)
    monkeypatch.setenv("EDDY_HOME", str(tmp_path / "home"))
    assert home_dir() == tmp_path / "home" / "kafka"
    monkeypatch.delenv("EDDY_HOME")
    monkeypatch.chdir(tmp_path)
    assert home_dir() == tmp_path / ".eddy" / "kafka"


def test_home_can_be_overridden(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "k"))
    assert home_dir() == tmp_path / "k"


def test_every_checkout_drives_the_broker_another_one_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_running_broker: Path
) -> None:
    # Only one broker owns the port: a fresh clone must find (and stop, restart)
    # the one this machine already runs, not take it for a stranger.
    monkeypatch.delenv(HOME_ENV, raising=False)
    monkeypatch.setenv("EDDY_HOME", str(tmp_path / "clone"))
    other = tmp_path / "first-checkout" / "kafka"
    other.mkdir(parents=True)
    (other / "broker.pid").write_text(f"{os.getpid()}\n")  # a live pid
    config.record_running(other)
    assert home_dir() == other
    (other / "broker.pid").write_text("999999999\n")  # killed: it comes back there
    assert home_dir() == other
    (other / "broker.pid").unlink()  # its folder was cleaned away: the record is stale
    assert home_dir() == tmp_path / "clone" / "kafka"
    (other / "broker.pid").write_text(f"{os.getpid()}\n")
    config.record_running(None)
    assert not no_running_broker.exists()


def test_layout_keeps_jars_per_version_and_data_shared(tmp_path: Path) -> None:
    three, four = Layout.at(tmp_path, V3), Layout.at(tmp_path, V4)
    assert three.lib == tmp_path / "3.9.2" / "lib"
    assert four.lib == tmp_path / "4.1.0" / "lib"
    assert three.data == four.data == tmp_path / "data"
    assert three.pid_file == four.pid_file == tmp_path / "broker.pid"
    assert three.log_config.name == "log4j.properties"
    assert four.log_config.name == "log4j2.properties"


# --- rendered files ---------------------------------------------------------------


def test_pom_for_kafka_3_binds_slf4j_to_reload4j() -> None:
    deps = dependencies(render_pom(V3))
    assert deps == {
        "org.apache.kafka:kafka_2.13": "3.9.2",
        "org.apache.kafka:kafka-tools": "3.9.2",
        "org.slf4j:slf4j-reload4j": "1.7.36",
        "ch.qos.reload4j:reload4j": "1.2.25",
    }


def test_pom_for_kafka_4_binds_slf4j_to_log4j2() -> None:
    deps = dependencies(render_pom(V4))
    assert deps == {
        "org.apache.kafka:kafka_2.13": "4.1.0",
        "org.apache.kafka:kafka-tools": "4.1.0",
        "org.apache.logging.log4j:log4j-slf4j-impl": "2.24.3",
        "org.apache.logging.log4j:log4j-core": "2.24.3",
        "org.apache.logging.log4j:log4j-api": "2.24.3",
    }


@pytest.mark.parametrize("version", [V3, V4])
def test_pom_pins_one_kafka_clients_version(version: KafkaVersion) -> None:
    pom = render_pom(version)
    managed = dependencies(pom, "m:dependencyManagement/m:dependencies")
    assert managed == {"org.apache.kafka:kafka-clients": str(version)}
    assert ET.fromstring(pom).findtext("m:packaging", namespaces=POM_NS) == "pom"


@pytest.mark.parametrize("version", [V3, V4])
def test_server_properties_for_one_transactional_node(
    tmp_path: Path, version: KafkaVersion
) -> None:
    text = render_server_properties(Layout.at(tmp_path, version))
    assert "$" not in text
    props = properties(text)
    expected = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:9092",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": str(tmp_path / "data"),
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "10",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "60000",
        "group.initial.rebalance.delay.ms": "0",
        "log.retention.hours": "168",
    }
    assert {key: props.get(key) for key in expected} == expected
    assert Path(props["log.dirs"]).is_absolute()
    share_groups = "share.coordinator.state.topic.replication.factor" in props
    assert share_groups is version.uses_log4j2  # 3.9 would warn about an unknown key


def test_log_config_for_kafka_3_is_log4j_1(tmp_path: Path) -> None:
    text = render_log_config(Layout.at(tmp_path, V3))
    assert "log4j.rootLogger=INFO, stderr, file" in text
    assert f"log4j.appender.file.File={tmp_path / 'logs'}/${{eddy.log.name}}" in text


def test_log_config_for_kafka_4_is_log4j2(tmp_path: Path) -> None:
    text = render_log_config(Layout.at(tmp_path, V4))
    assert "log4j.rootLogger" not in text
    assert f"appender.file.fileName = {tmp_path / 'logs'}/${{sys:eddy.log.name}}" in text
    assert "rootLogger.level = info" in text


def test_broker_command_for_kafka_3(tmp_path: Path) -> None:
    lay = Layout.at(tmp_path, V3)
    command = java_command(lay, "kafka.Kafka", "server.properties", jvm=BROKER_JVM)
    assert command[1:3] == ["-Xms512m", "-Xmx1g"]
    assert f"-Dlog4j.configuration=file:{tmp_path / 'log4j.properties'}" in command
    assert not any(arg.startswith("-Dlog4j2") for arg in command)
    assert command[command.index("-cp") + 1] == f"{tmp_path / '3.9.2' / 'lib'}/*"
    assert command[-2:] == ["kafka.Kafka", "server.properties"]


def test_broker_command_for_kafka_4(tmp_path: Path) -> None:
    command = java_command(Layout.at(tmp_path, V4), "kafka.Kafka", "server.properties")
    assert f"-Dlog4j2.configurationFile={tmp_path / 'log4j2.properties'}" in command
    assert not any(arg.startswith("-Dlog4j.configuration=") for arg in command)
    assert "-Deddy.log.name=tools.log" in command


# --- fetch, with a stand-in for mvn ---------------------------------------------------


@pytest.fixture
def fake_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ``mvn`` on PATH whose behaviour the test writes into ``script``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    monkeypatch.setenv(VERSION_ENV, "3.9.2")
    return bin_dir / "mvn"


def write_script(path: Path, body: str) -> None:
    out = 'out=""; for a in "$@"; do case "$a" in -DoutputDirectory=*) out="${a#*=}";; esac; done\n'
    path.write_text(f"#!/bin/sh\n{out}{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_fetch_copies_jars_then_marks_them_complete(fake_mvn: Path, tmp_path: Path) -> None:
    write_script(fake_mvn, 'mkdir -p "$out" && touch "$out/kafka-clients-3.9.2.jar"')
    lib = localkafka.fetch()
    assert lib == tmp_path / "home" / "3.9.2" / "lib"
    assert (lib / ".complete").exists()
    assert (lib / "kafka-clients-3.9.2.jar").exists()
    assert "kafka_2.13" in (lib.parent / "pom.xml").read_text()
    assert {p.name for p in lib.parent.iterdir()} == {"lib", "pom.xml"}  # no staging left


def test_fetch_is_skipped_once_complete(fake_mvn: Path) -> None:
    write_script(fake_mvn, 'mkdir -p "$out" && touch "$out/kafka-clients-3.9.2.jar"')
    lib = localkafka.fetch()
    write_script(fake_mvn, "echo mvn must not run again; exit 1")
    assert localkafka.fetch() == lib


def test_failed_fetch_quotes_mvn_and_leaves_no_lib(fake_mvn: Path) -> None:
    write_script(fake_mvn, 'mkdir -p "$out"; echo "[ERROR] Could not resolve kafka_2.13"; exit 1')
    with pytest.raises(LocalKafkaError, match=r"(?s)exit 1.*Could not resolve kafka_2.13"):
        localkafka.fetch()
    version_dir = Path(os.environ[HOME_ENV]) / "3.9.2"
    assert sorted(p.name for p in version_dir.iterdir()) == ["pom.xml"]


def test_two_kafka_clients_versions_are_refused(fake_mvn: Path) -> None:
    write_script(
        fake_mvn,
        'mkdir -p "$out"; touch "$out/kafka-clients-3.9.2.jar" "$out/kafka-clients-3.7.0.jar"',
    )
    with pytest.raises(LocalKafkaError, match=re.escape("only kafka-clients-3.9.2.jar")):
        localkafka.fetch()
    assert not (Path(os.environ[HOME_ENV]) / "3.9.2" / "lib").exists()


def test_a_broker_crowded_by_earlier_runs_topics_is_named_and_reset_empties_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_running_broker: Path
) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    lay = config.layout()
    for n in range(localkafka.CROWDED_PARTITIONS + 1):
        (lay.data / f"test-{n // 6}-sensor-readings-{n % 6}").mkdir(parents=True)
    (lay.data / "meta.properties").write_text("cluster.id=x\n")
    console = Console(record=True, width=200)
    localkafka._warn_if_crowded(console, lay)
    said = console.export_text()
    assert "3,001 partitions" in said
    assert "make kafka-reset" in said
    assert localkafka.reset(console) == 3_001
    assert not lay.data.exists()
    # Under the limit: nothing said.
    quiet = Console(record=True)
    localkafka._warn_if_crowded(quiet, lay)
    assert quiet.export_text() == ""
