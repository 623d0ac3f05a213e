"""What the local broker is: its version, where its files live, how it is configured.

Pure functions without network or processes, so the unit tests can check every
rendered file for Kafka 3.x and 4.x on any machine.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

from eddy.errors import LocalKafkaError
from eddy.paths import eddy_home

VERSION_ENV = "KAFKA_VERSION"
HOME_ENV = "EDDY_LOCAL_KAFKA_DIR"
DEFAULT_VERSION = "3.9.2"
HOST = "127.0.0.1"
BROKER_PORT = 9092
CONTROLLER_PORT = 9093
BOOTSTRAP = f"{HOST}:{BROKER_PORT}"
COPY_DEPENDENCIES = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"
BROKER_JVM = ["-Xms512m", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"]


@dataclass(frozen=True, order=True)
class KafkaVersion:
    """A Kafka release this module knows how to run (3.3+ for KRaft, or 4.x)."""

    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str) -> KafkaVersion:
        """Raises LocalKafkaError naming KAFKA_VERSION, since that is where bad input comes from."""
        match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", text.strip())
        if not match:
            raise LocalKafkaError(
                f"{VERSION_ENV}={text!r} is not a Kafka version: use major.minor.patch, "
                f"e.g. {DEFAULT_VERSION} or 4.1.0"
            )
        version = cls(*(int(part) for part in match.groups()))
        if not (3, 3) <= (version.major, version.minor) < (5, 0):
            raise LocalKafkaError(
                f"{VERSION_ENV}={version}: the local broker runs Kafka 3.3 to 4.x in KRaft mode; "
                f"unset it for {DEFAULT_VERSION}"
            )
        return version

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def uses_log4j2(self) -> bool:
        return self.major >= 4


def configured_version(version: str | None = None) -> KafkaVersion:
    return KafkaVersion.parse(version or os.environ.get(VERSION_ENV) or DEFAULT_VERSION)


# Only one broker can own port 9092 on a machine, whichever checkout started it (a
# CI clone, a second worktree): the folder of the running one is recorded here, so
# every checkout stops, restarts and inspects that broker rather than calling it a
# stranger.
RUNNING_HOME = Path(tempfile.gettempdir()) / f"eddy-local-kafka-{BROKER_PORT}.home"


def home_dir() -> Path:
    """``$EDDY_LOCAL_KAFKA_DIR`` if set; else the folder of the local broker this
    machine runs (or ran, if it was killed rather than stopped), if any; else
    ``$EDDY_HOME/kafka`` (service/paths.py), so every command and test given one
    EDDY_HOME (make exports it) shares one broker."""
    if override := os.environ.get(HOME_ENV):
        return Path(override).expanduser().resolve()
    return running_home() or eddy_home() / "kafka"


def running_home() -> Path | None:
    """The recorded folder of the machine's broker, until it is stopped cleanly.

    A broker killed with ``kill -9`` (a chaos fault, a crash) keeps its record: it
    must come back in its own folder, with its topics, whichever checkout starts it
    again. A record whose folder is gone is stale.
    """
    try:
        home = Path(RUNNING_HOME.read_text().strip())
    except (OSError, ValueError):
        return None
    return home if (home / "broker.pid").is_file() else None


def record_running(home: Path | None) -> None:
    """Say which folder's broker owns the port now (None: no broker of ours)."""
    if home is None:
        RUNNING_HOME.unlink(missing_ok=True)
    else:
        RUNNING_HOME.write_text(f"{home}\n")


@dataclass(frozen=True)
class Layout:
    """Where everything lives. Jars are per version; data, logs, config and pid are
    shared, because only one broker can own port 9092."""

    home: Path
    version: KafkaVersion
    version_dir: Path
    lib: Path
    data: Path
    logs: Path
    stdout_log: Path
    server_properties: Path
    log_config: Path
    pid_file: Path
    meta_file: Path

    @classmethod
    def at(cls, home: Path, version: KafkaVersion) -> Layout:
        log_config = "log4j2.properties" if version.uses_log4j2 else "log4j.properties"
        return cls(
            home=home,
            version=version,
            version_dir=home / str(version),
            lib=home / str(version) / "lib",
            data=home / "data",
            logs=home / "logs",
            stdout_log=home / "logs" / "stdout.log",
            server_properties=home / "server.properties",
            log_config=home / log_config,
            pid_file=home / "broker.pid",
            meta_file=home / "meta.json",
        )


def layout(version: str | None = None, home: Path | None = None) -> Layout:
    return Layout.at(home or home_dir(), configured_version(version))


def _template(name: str, **values: object) -> str:
    text = resources.files("tools.localkafka").joinpath("templates", name).read_text()
    return Template(text).substitute({key: str(value) for key, value in values.items()})


def render_pom(version: KafkaVersion) -> str:
    return _template(f"pom-kafka{version.major}.xml", kafka_version=version)


def render_log_config(lay: Layout) -> str:
    return _template(lay.log_config.name, logs_dir=lay.logs)


def render_server_properties(lay: Layout) -> str:
    extra = ""
    if lay.version.uses_log4j2:  # Kafka 4 has share groups (KIP-932): RF 1 here too.
        extra = (
            "share.coordinator.state.topic.replication.factor=1\n"
            "share.coordinator.state.topic.min.isr=1\n"
        )
    return _template(
        "server.properties",
        kafka_version=lay.version,
        host=HOST,
        broker_port=BROKER_PORT,
        controller_port=CONTROLLER_PORT,
        log_dirs=lay.data.resolve(),
        extra_properties=extra,
    )


def java_command(
    lay: Layout,
    main_class: str,
    *args: str,
    jvm: list[str] | None = None,
    log_name: str = "tools.log",
) -> list[str]:
    """The quoted ``lib/*`` is kept literal (no shell): the JVM expands it itself.

    Tools log to their own file (``log_name``), so the broker's server.log stays its own.
    """
    java = shutil.which("java")
    if java is None:
        raise LocalKafkaError("java is not on PATH: install Java 17 to run the local broker")
    log_property = (
        "-Dlog4j2.configurationFile=" if lay.version.uses_log4j2 else "-Dlog4j.configuration=file:"
    )
    return [
        java,
        *(jvm or ["-Xmx256m"]),
        f"{log_property}{lay.log_config}",
        f"-Dkafka.logs.dir={lay.logs}",
        f"-Deddy.log.name={log_name}",
        "-cp",
        f"{lay.lib}/*",
        main_class,
        *args,
    ]


def needs_wipe(previous: KafkaVersion | None, current: KafkaVersion) -> bool:
    """Kafka cannot read a data dir across a major version here, nor after a downgrade
    (the metadata version written at format time is newer than it knows)."""
    return previous is not None and (previous.major != current.major or current < previous)
