"""A KRaft cluster of several brokers on this machine, for faults a single broker
cannot have: a partition leader killed while transactions are open, with
replication 3 and ``min.insync.replicas=2`` (what Kafka Streams' EOS test asks).

Node ``i`` (1..n) listens on ``base_port + i - 1`` and votes on
``base_port + 100 + i - 1``; everything lives in its own folder
``$EDDY_HOME/kafka-cluster/<n>x<base_port>`` (jars, data, logs, pids), apart
from the shared broker on 9092. ``python -m tools kafka cluster start|stop``.

On hosts of their own (``hosts`` and ``netns``, as the fleet harness gives them),
node ``i`` instead listens on ``hosts[i-1]:9092``, votes on ``hosts[i-1]:9093``,
advertises that address and runs inside network namespace ``netns[i-1]``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from importlib import resources
from string import Template

from eddy.errors import LocalKafkaError
from eddy.paths import eddy_home
from tools.localkafka import broker
from tools.localkafka.config import (
    BROKER_JVM,
    BROKER_PORT,
    CONTROLLER_PORT,
    HOST,
    KafkaVersion,
    Layout,
    java_command,
    render_log_config,
)

DEFAULT_BASE_PORT = 19092
CONTROLLER_OFFSET = 100


class Brokers:
    """Start, stop, kill and restart the nodes of one cluster."""

    def __init__(
        self,
        version: KafkaVersion,
        nodes: int = 3,
        base_port: int = DEFAULT_BASE_PORT,
        *,
        hosts: Sequence[str] = (),
        netns: Sequence[str] = (),
        name: str | None = None,
    ) -> None:
        if not 1 <= nodes <= 9:
            raise LocalKafkaError(f"a local cluster has 1 to 9 brokers, not {nodes}")
        if hosts and (len(hosts) != nodes or (netns and len(netns) != nodes)):
            raise LocalKafkaError(f"a cluster of {nodes} brokers needs {nodes} hosts and netns")
        self.version, self.nodes, self.base_port = version, nodes, base_port
        self.hosts, self.netns = tuple(hosts), tuple(netns)
        self.home = eddy_home() / "kafka-cluster" / (name or f"{nodes}x{base_port}")
        # A named cluster (``fleet/<tag>``, one per run) shares the jars of its folder.
        self.jars = (self.home.parent if name else self.home) / str(version)
        self.replication = nodes
        self.min_isr = min(2, nodes)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host(i)}:{self.port(i)}" for i in self.ids)

    @property
    def ids(self) -> range:
        return range(1, self.nodes + 1)

    def host(self, node: int) -> str:
        return self.hosts[node - 1] if self.hosts else HOST

    def port(self, node: int) -> int:
        return BROKER_PORT if self.hosts else self.base_port + node - 1

    def controller_port(self, node: int) -> int:
        return CONTROLLER_PORT if self.hosts else self.port(node) + CONTROLLER_OFFSET

    def layout(self, node: int) -> Layout:
        """Node ``node``'s files; the jars are the cluster's, shared by its nodes."""
        lay = Layout.at(self.home / f"node{node}", self.version)
        jars = self.jars
        return dataclasses.replace(lay, version_dir=jars, lib=jars / "lib")

    def render_properties(self, node: int) -> str:
        voters = ",".join(f"{i}@{self.host(i)}:{self.controller_port(i)}" for i in self.ids)
        extra = ""
        if self.version.major >= 4:
            extra = (
                f"share.coordinator.state.topic.replication.factor={self.replication}\n"
                f"share.coordinator.state.topic.min.isr={self.min_isr}\n"
            )
        text = resources.files("tools.localkafka").joinpath("templates", "cluster.properties")
        return Template(text.read_text()).substitute(
            kafka_version=self.version,
            node_id=node,
            nodes=self.nodes,
            voters=voters,
            host=self.host(node),
            broker_port=self.port(node),
            controller_port=self.controller_port(node),
            log_dirs=self.layout(node).data.resolve(),
            replication=self.replication,
            min_isr=self.min_isr,
            extra_properties=extra,
        )

    def start(self) -> str:
        """Format (once) and start every node; the bootstrap servers once all answer.

        Raises:
            LocalKafkaError: a port is taken, or a node did not start.
        """
        with broker.locked(self.home):
            broker.fetch_unlocked(self.layout(1))
            cluster_id = self._cluster_id()
            # Every voter first: a node alone never finds a quorum to register with.
            started = {}
            for node in self.ids:
                if self.pid(node) is None:
                    self._prepare(node, cluster_id)
                    started[node] = self._spawn(node)
            for node, child in started.items():
                self._wait(node, child)
        return self.bootstrap

    def _cluster_id(self) -> str:
        id_file = self.home / "cluster.id"
        if not id_file.exists():
            lay = self.layout(1)
            lay.logs.mkdir(parents=True, exist_ok=True)
            lay.log_config.write_text(render_log_config(lay))
            out = _storage_tool(lay, "random-uuid")
            id_file.write_text(out.strip().splitlines()[-1].strip() + "\n")
        return id_file.read_text().strip()

    def _prepare(self, node: int, cluster_id: str) -> None:
        lay = self.layout(node)
        if not self.hosts and broker.port_in_use(self.port(node)):
            raise LocalKafkaError(f"port {self.port(node)} is taken: stop what holds it")
        lay.logs.mkdir(parents=True, exist_ok=True)
        lay.log_config.write_text(render_log_config(lay))
        lay.server_properties.write_text(self.render_properties(node))
        if not (lay.data / "meta.properties").exists():
            lay.data.mkdir(parents=True, exist_ok=True)
            _storage_tool(lay, "format", "-t", cluster_id, "-c", str(lay.server_properties))

    def start_node(self, node: int) -> None:
        """Start node ``node`` again (the others run) and wait until it answers."""
        self._wait(node, self._spawn(node))

    def _spawn(self, node: int) -> subprocess.Popen[bytes]:
        lay = self.layout(node)
        command = java_command(
            lay, "kafka.Kafka", str(lay.server_properties), jvm=_jvm(), log_name="server.log"
        )
        if self.netns:  # `ip netns exec` execs java: the pid is the broker's
            command = ["ip", "netns", "exec", self.netns[node - 1], *command]
        with lay.stdout_log.open("wb") as out:
            child = subprocess.Popen(
                command, cwd=lay.home, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        lay.pid_file.write_text(f"{child.pid}\n")
        return child

    def _wait(self, node: int, child: subprocess.Popen[bytes]) -> None:
        broker.wait_until_ready(
            f"{self.host(node)}:{self.port(node)}",
            broker.READY_TIMEOUT_S,
            alive=lambda: child.poll() is None,
        )

    def pid(self, node: int) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            pid = int(self.layout(node).pid_file.read_text().strip())
            os.kill(pid, 0)
            return pid
        return None

    def kill(self, node: int) -> None:
        """kill -9 node ``node``: no controlled shutdown, its leaderships just vanish."""
        pid = self.pid(node)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self.layout(node).pid_file.unlink(missing_ok=True)

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL after a while); data stays."""
        for node in self.ids:
            pid = self.pid(node)
            if pid is not None:
                broker.terminate(pid, broker.STOP_TIMEOUT_S)
            self.layout(node).pid_file.unlink(missing_ok=True)

    def wipe(self) -> None:
        """Delete the cluster's data (stopped first): the next start formats anew."""
        self.stop()
        for node in self.ids:
            shutil.rmtree(self.layout(node).data, ignore_errors=True)
        (self.home / "cluster.id").unlink(missing_ok=True)


async def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> the node id leading it now."""
    from eddy.settings import load_settings
    from eddy.topics import admin_client

    admin = admin_client(load_settings(bootstrap_servers=bootstrap, worker_id="leaders"))
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    return {p["partition"]: p["leader"] for t in described for p in t["partitions"]}


def _jvm() -> list[str]:
    # Three brokers share two cores and the workers' memory: a smaller heap each.
    return ["-Xms256m", "-Xmx512m", *BROKER_JVM[2:]]


def _storage_tool(lay: Layout, *args: str) -> str:
    command = java_command(lay, "kafka.tools.StorageTool", *args)
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        raise LocalKafkaError(
            f"kafka.tools.StorageTool {args[0]} failed (exit {result.returncode}): "
            f"{(result.stdout + result.stderr)[-2000:]}"
        )
    return result.stdout
