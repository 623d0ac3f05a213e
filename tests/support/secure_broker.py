"""A throwaway Kafka broker that only speaks SASL/SCRAM over TLS, for security tests.

It runs beside the shared local broker, never instead of it: its own directory,
its own free ports, its own logs. It borrows only the jars that
``tools.localkafka`` fetched and its ``java`` command line. The CA and the
broker's key are made with the JDK's keytool, as an operator without openssl would.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import free_port
from tools import localkafka
from tools.localkafka import broker
from tools.localkafka.config import Layout, java_command, layout, render_log_config

HOST = "127.0.0.1"
STORE_PASSWORD = "throwaway-store-pass"
ADMIN = ("admin", "admin-secret")  # the broker's own inter-broker identity
MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class SecureBroker:
    bootstrap: str
    cafile: Path
    log: Path


def _keytool(directory: Path, *args: str) -> None:
    subprocess.run(
        # C1 only and a serial GC: each keytool run is a short-lived JVM.
        ["keytool", "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", *args],
        cwd=directory,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )


def make_certificates(directory: Path) -> tuple[Path, Path]:
    """A CA, and a broker key signed by it for 127.0.0.1 and localhost.

    Returns (CA certificate as PEM, broker keystore). The broker trusts the PEM
    directly (Kafka reads PEM truststores), which saves a keytool run.
    """
    common = ["-storetype", "PKCS12", "-storepass", STORE_PASSWORD, "-keypass", STORE_PASSWORD]
    key = ["-keyalg", "RSA", "-keysize", "2048", "-validity", "2"]
    _keytool(
        directory,
        "-genkeypair",
        "-alias",
        "ca",
        "-dname",
        "CN=eddy-test-ca",
        *key,
        "-ext",
        "bc:c",
        "-keystore",
        "ca.p12",
        *common,
    )
    _keytool(
        directory,
        "-exportcert",
        "-rfc",
        "-alias",
        "ca",
        "-file",
        "ca.pem",
        "-keystore",
        "ca.p12",
        *common,
    )
    _keytool(
        directory,
        "-genkeypair",
        "-alias",
        "broker",
        "-dname",
        "CN=localhost",
        *key,
        "-keystore",
        "broker.p12",
        *common,
    )
    _keytool(
        directory,
        "-certreq",
        "-alias",
        "broker",
        "-file",
        "broker.csr",
        "-keystore",
        "broker.p12",
        *common,
    )
    _keytool(
        directory,
        "-gencert",
        "-alias",
        "ca",
        "-infile",
        "broker.csr",
        "-outfile",
        "broker.pem",
        "-rfc",
        "-validity",
        "2",
        "-ext",
        "san=ip:127.0.0.1,dns:localhost",
        "-keystore",
        "ca.p12",
        *common,
    )
    for alias, cert, store in (
        ("ca", "ca.pem", "broker.p12"),
        ("broker", "broker.pem", "broker.p12"),
    ):
        _keytool(
            directory,
            "-importcert",
            "-noprompt",
            "-alias",
            alias,
            "-file",
            cert,
            "-keystore",
            store,
            *common,
        )
    return directory / "ca.pem", directory / "broker.p12"


def _properties(home: Path, port: int, controller: int, keystore: Path, trust: Path) -> str:
    # The broker talks to itself over the same SASL_SSL listener (as a SCRAM user),
    # so no plaintext port exists at all; the controller listener is loopback-only.
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ADMIN[0]}" password="{ADMIN[1]}";'
    )
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@{HOST}:{controller}",
            f"listeners=SASL_SSL://{HOST}:{port},CONTROLLER://{HOST}:{controller}",
            f"advertised.listeners=SASL_SSL://{HOST}:{port}",
            "inter.broker.listener.name=SASL_SSL",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
            f"sasl.enabled.mechanisms={MECHANISM}",
            f"sasl.mechanism.inter.broker.protocol={MECHANISM}",
            f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={jaas}",
            "ssl.keystore.type=PKCS12",
            f"ssl.keystore.location={keystore}",
            f"ssl.keystore.password={STORE_PASSWORD}",
            f"ssl.key.password={STORE_PASSWORD}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={trust}",
            f"log.dirs={home / 'data'}",
            "auto.create.topics.enable=false",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=3",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=3",
            "group.initial.rebalance.delay.ms=0",
            "",
        ]
    )


def _private_layout(home: Path) -> Layout:
    """The shared broker's jars, but logs and config in ``home``."""
    shared = layout()
    if not broker.is_fetched(shared):  # checked first: fetch() waits for the shared lock
        localkafka.fetch()
    private = Layout.at(home, shared.version)
    return dataclasses.replace(private, lib=shared.lib)


@contextlib.contextmanager
def secure_broker(home: Path, users: dict[str, str]) -> Iterator[SecureBroker]:
    """Starts the broker with SCRAM credentials for ``users`` (name -> password) and
    stops it (SIGTERM, then SIGKILL) on exit."""
    home.mkdir(parents=True, exist_ok=True)
    cafile, keystore = make_certificates(home)
    lay = _private_layout(home)
    lay.logs.mkdir(parents=True, exist_ok=True)
    lay.log_config.write_text(render_log_config(lay))
    port, controller = free_port(), free_port()
    properties = home / "server.properties"
    properties.write_text(_properties(home, port, controller, keystore, cafile))
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    scram = [
        arg
        for name, password in {ADMIN[0]: ADMIN[1], **users}.items()
        for arg in ("--add-scram", f"{MECHANISM}=[name={name},password={password}]")
    ]
    subprocess.run(
        java_command(
            lay,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(properties),
            *scram,
        ),
        check=True,
        capture_output=True,
        timeout=120,
    )
    log = lay.logs / "stdout.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            java_command(
                lay, "kafka.Kafka", str(properties), jvm=["-Xmx512m"], log_name="server.log"
            ),
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_for_listener(process, port, log)
        yield SecureBroker(bootstrap=f"{HOST}:{port}", cafile=cafile, log=lay.logs / "server.log")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_listener(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    """The port opens once the broker serves; clients then retry their own handshakes."""
    import socket

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"secure broker exited:\n{log.read_text(errors='replace')}")
        with socket.socket() as sock:
            sock.settimeout(1.0)
            if sock.connect_ex((HOST, port)) == 0:
                return
        time.sleep(0.3)
    raise AssertionError(f"secure broker did not listen on {port}:\n{log.read_text()[-3000:]}")
