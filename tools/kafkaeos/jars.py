"""Kafka Streams' system-test classes (``kafka-streams``, classifier ``test``) and
what they need, fetched by Maven as :mod:`tools.localkafka` fetches the broker.

The test jar must be the broker's version: ``EosTestDriver`` and
``EosTestClient`` change with Kafka (the verifier's checks, its timeouts).
"""

from __future__ import annotations

import shutil
import subprocess
from importlib import resources
from pathlib import Path
from string import Template

from eddy.errors import LocalKafkaError
from eddy.paths import eddy_home
from tools.localkafka.config import COPY_DEPENDENCIES, KafkaVersion

MAIN_CLASS = "org.apache.kafka.streams.tests.StreamsEosTest"
FETCH_TIMEOUT_S = 900


def home(version: KafkaVersion) -> Path:
    return eddy_home() / "kafkaeos" / str(version)


def render_pom(version: KafkaVersion) -> str:
    text = resources.files("tools.kafkaeos").joinpath("templates", "pom-streams-test.xml")
    # Kafka 3.x logs through SLF4J 1, Kafka 4.x through SLF4J 2: the binding must match.
    slf4j = "2.0.16" if version.major >= 4 else "1.7.36"
    return Template(text.read_text()).substitute(kafka_version=version, slf4j_version=slf4j)


def fetch(version: KafkaVersion) -> Path:
    """The folder of the jars (``<folder>/*`` is the classpath), fetched once.

    Raises:
        LocalKafkaError: Maven is missing or could not resolve the version.
    """
    folder = home(version)
    lib = folder / "lib"
    if (lib / f"kafka-streams-{version}-test.jar").exists():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalKafkaError("mvn is not on PATH: install Maven to fetch Kafka's test jar")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pom.xml").write_text(render_pom(version))
    command = [mvn, "-B", "-q", "-Dstyle.color=never", COPY_DEPENDENCIES, "-DoutputDirectory=lib"]
    result = subprocess.run(
        command, cwd=folder, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S, check=False
    )
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
        raise LocalKafkaError(
            f"mvn could not fetch kafka-streams {version} (classifier test) from Maven "
            f"Central (exit {result.returncode}; pom in {folder}); mvn said:\n{tail}"
        )
    return lib


def command(lib: Path, properties: Path, action: str) -> list[str]:
    """``StreamsEosTest <properties> <action>``: run, process, process-complex,
    verify or verify-complex (the properties file names the bootstrap servers)."""
    java = shutil.which("java")
    if java is None:
        raise LocalKafkaError("java is not on PATH: install Java 17 to run Kafka's EOS test")
    return [java, "-Xmx384m", "-cp", f"{lib}/*", MAIN_CLASS, str(properties), action]
