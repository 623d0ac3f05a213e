"""One run of Kafka's exactly-once system test, as ``streams_eos_test.py`` runs
it: the driver produces to ``data`` while three instances of the application
under test process it and are bounced (kill -9, then a clean stop, in turn) and,
on a fleet, cut off (an instance from the brokers, a partition leader from the
other brokers);
the driver stops, the instances drain and stop, and Kafka's verifier reads
everything (``verify``, then ``verify-complex``). Its output is the verdict:
``ALL-RECORDS-DELIVERED`` is a pass, anything else (``FAILED``, an exception)
a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eddy.paths import eddy_home
from eddy.settings import Settings, load_settings
from tools.chaos.kafkaio import GroupLag
from tools.kafkaeos import jars, topics
from tools.kafkaeos.app import GROUP_ID, app
from tools.kafkaeos.clients import AppUnderTest, EddyWorkers, StreamsClients, spawn, wait_exit
from tools.kafkaeos.network import (
    SESSION_TIMEOUT_MS,
    TRANSACTION_TIMEOUT_MS,
    FleetFaults,
    NetworkFault,
)
from tools.localkafka.cluster import Brokers
from tools.localkafka.cluster import leaders as partition_leaders
from tools.localkafka.config import KafkaVersion

if TYPE_CHECKING:
    from tools.fleet.hosts import Fleet

REPO = Path(__file__).resolve().parents[2]
DELIVERED = "ALL-RECORDS-DELIVERED"
DRAIN_TIMEOUT_S = 300.0
VERIFY_TIMEOUT_S = 900.0
SLOTS = ("w1", "w2", "w3")
FLEET_SLOTS = ("w0", "w1", "w2")  # the fleet's worker hosts w1, w2, w3
NETWORK_FAULTS = ("cut", "isolate")


@dataclass(frozen=True)
class RunConfig:
    """What one run does. ``bounces`` alternate: hard (kill -9) first, then clean.
    ``worker_cuts`` and ``leader_isolations`` need a fleet."""

    version: KafkaVersion
    bootstrap: str
    replication: int = 1
    duration_s: float = 90.0
    bounces: int = 6
    leader_kills: int = 0
    guarantee: str = "exactly_once"
    client: str = "eddy"  # or "streams": Kafka Streams' EosTestClient
    partitions: int = 5
    commit_interval_ms: int = 100
    seed: int = 1
    fleet: bool = False  # brokers and instances on hosts of their own
    worker_cuts: int = 0
    leader_isolations: int = 0


@dataclass
class Verdict:
    command: str
    passed: bool
    line: str  # the verifier's own verdict line, or its first error
    seconds: float


@dataclass
class RunResult:
    config: RunConfig
    run_dir: Path
    produced: int = 0
    driven_s: float = 0.0  # the driver's time: restarts slower than a gap lengthen it
    hard: int = 0
    clean: int = 0
    leader_kills: int = 0
    network: list[NetworkFault] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts) and not self.crashes

    def summary(self) -> list[str]:
        c = self.config
        where = "on a fleet of hosts, " if c.fleet else ""
        lines = [
            f"Kafka {c.version}, {where}{c.replication} broker(s) ({c.bootstrap}), {c.client} "
            f"({c.guarantee}), {c.partitions} partitions: {self.produced} records produced in "
            f"{self.driven_s:.0f} s; bounces: {self.hard} hard (kill -9), {self.clean} clean "
            f"(SIGTERM); partition-leader kills: {self.leader_kills}; "
            f"network faults: {len(self.network)}; {self.seconds:.0f} s in all",
        ]
        lines += [f"  {fault.what} for {fault.seconds:.1f} s" for fault in self.network]
        for v in self.verdicts:
            verdict = "SUCCESS" if v.passed else "FAILED"
            lines.append(f"  {v.command}: {verdict} ({v.line}; {v.seconds:.0f} s)")
        lines += [f"  crash: {crash}" for crash in self.crashes]
        return lines


def verdict_of(command: str, output: str, seconds: float) -> Verdict:
    """The verifier's verdict from its output (see the module docstring)."""
    lines = [line.strip() for line in output.splitlines()]
    if DELIVERED in lines and "FAILED" not in lines:
        return Verdict(command, True, DELIVERED, seconds)
    found = [line for line in lines if "Exception" in line or line.startswith("FAIL")]
    # "echo-1 with 1621, data-1 with 1617": the partition whose counts differ.
    found += [line for line in lines if _counts_differ(line)]
    return Verdict(command, False, "; ".join(found)[:400] or "no verdict", seconds)


def _counts_differ(line: str) -> bool:
    match = re.fullmatch(r"\S+ with (\d+), \S+ with (\d+)", line)
    return match is not None and match.group(1) != match.group(2)


def produced(driver_log: Path) -> int:
    found = re.findall(r"(\d+) records produced", driver_log.read_text(errors="replace"))
    return int(found[-1]) if found else 0


def plan(config: RunConfig) -> list[str]:
    """The run's faults in order: bounces alternate hard and clean; leader kills,
    worker cuts and leader isolations are spread among them."""
    faults = ["hard" if i % 2 == 0 else "clean" for i in range(config.bounces)]
    for i in range(config.leader_kills):
        faults.insert(min(len(faults), 2 * i + 1), "leader")
    for i in range(config.worker_cuts):
        faults.insert(min(len(faults), 3 * i + 2), "cut")
    for i in range(config.leader_isolations):
        faults.insert(min(len(faults), 3 * i + 5), "isolate")
    return faults


class EosKafkaRun:
    def __init__(
        self, config: RunConfig, brokers: Brokers | None = None, fleet: Fleet | None = None
    ) -> None:
        self.config = config
        self.fleet = fleet
        self.brokers = fleet.brokers if fleet is not None else brokers
        self.slots = FLEET_SLOTS if fleet is not None else SLOTS
        tag = uuid.uuid4().hex[:8]
        self.app_id = f"eos-kafka-{tag}"
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.run_dir = eddy_home() / "eos-kafka" / f"{stamp}-{config.version}-{tag}"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.settings = self._settings()
        self.result = RunResult(config, self.run_dir)
        self.random = random.Random(config.seed)
        self.network = (
            FleetFaults(fleet, config.bootstrap, self.random) if fleet is not None else None
        )
        self.lib = jars.fetch(config.version)
        self.properties = self.run_dir / "eos.properties"
        self.properties.write_text(
            f"bootstrap.servers={config.bootstrap}\nprocessing.guarantee=exactly_once_v2\n"
        )

    def _settings(self) -> Settings:
        c = self.config
        # On a fleet a cut outlasts both timeouts: they are short there.
        fleet = self.fleet is not None
        timeouts = {"transaction_timeout_ms": TRANSACTION_TIMEOUT_MS} if fleet else {}
        return load_settings(
            app.settings_classes(),
            app="tools.kafkaeos.app:app",
            app_id=self.app_id,
            bootstrap_servers=c.bootstrap,
            topic_prefix="",
            dead_letter_topic=f"{self.app_id}-dead-letters",
            processing_guarantee=c.guarantee,
            commit_interval_ms=c.commit_interval_ms,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            partitions=c.partitions,
            replication_factor=c.replication,
            state_dir=self.run_dir / "state",
            api_port=0,
            worker_id="eos-kafka",
            **timeouts,
        )

    def _app(self) -> AppUnderTest:
        if self.config.client == "streams":
            streams = StreamsClients(self.lib, self.properties, self.run_dir, self.fleet)
            if self.fleet is not None:
                streams.client_properties = {
                    "transaction.timeout.ms": str(TRANSACTION_TIMEOUT_MS),
                    "session.timeout.ms": str(SESSION_TIMEOUT_MS),
                }
            return streams
        return EddyWorkers(self.settings, self.run_dir, REPO, self.fleet)

    async def execute(self, say: Callable[[str], None] = print) -> RunResult:
        started = time.monotonic()
        await topics.recreate(self.settings, self.config.partitions)
        driver = self._java("run", self.run_dir / "driver.log")
        driving = time.monotonic()
        under_test = self._app()
        try:
            for slot in self.slots:
                await under_test.start(slot)
            say(
                f"driver and {len(self.slots)} {self.config.client} instances running "
                f"({self.run_dir})"
            )
            await self._bounce(under_test, say)
            await self._stop_driver(driver)
            self.result.driven_s = time.monotonic() - driving
            self.result.produced = produced(self.run_dir / "driver.log")
            say(f"driver stopped after {self.result.produced} records; draining")
            await self._drain()
            self.result.crashes = under_test.crashes()
        finally:
            with contextlib.suppress(ProcessLookupError):
                driver.kill()
            await under_test.stop_all()
        for command in ("verify", "verify-complex"):
            self.result.verdicts.append(await self._verify(command))
        await topics.delete(self.settings, await topics.run_topics(self.settings, self.app_id))
        self.result.seconds = time.monotonic() - started
        return self.result

    def _java(self, action: str, log_path: Path) -> subprocess.Popen[bytes]:
        return spawn(jars.command(self.lib, self.properties, action), log_path)

    async def _bounce(self, under_test: AppUnderTest, say: Callable[[str], None]) -> None:
        faults = plan(self.config)
        gap_s = self.config.duration_s / (len(faults) + 1)
        bounced = 0
        # A network fault lasts 10-20 s: it counts toward the next gap (half a gap at least
        # follows it), so the driving stays close to ``duration_s``.
        network_s = 0.0
        started = time.monotonic()
        for fault in faults:
            await asyncio.sleep(max(gap_s / 2, gap_s - network_s))
            network_s = 0.0
            if fault == "leader":
                await self._kill_leader(say)
                continue
            if fault in NETWORK_FAULTS:
                network_s = await self._network_fault(fault, say)
                continue
            slot = self.slots[bounced % len(self.slots)]  # each instance in turn
            bounced += 1
            if fault == "hard":
                await under_test.hard_kill(slot)
                self.result.hard += 1
            else:
                await under_test.clean_stop(slot)
                self.result.clean += 1
            say(f"{fault} bounce of {slot} at {time.monotonic() - started:.0f} s")
            await under_test.start(slot)
        await asyncio.sleep(gap_s)

    async def _network_fault(self, fault: str, say: Callable[[str], None]) -> float:
        """A cut (an instance's host, drawn by the seed) or an isolation; its seconds."""
        if self.network is None:
            raise RuntimeError("worker cuts and leader isolations need --fleet")
        if fault == "cut":
            done = await self.network.cut_worker(self.random.choice(self.slots))
        else:
            done = await self.network.isolate_leader()
        self.result.network.append(done)
        say(f"{done.what} for {done.seconds:.1f} s, healed")
        return done.seconds

    async def _kill_leader(self, say: Callable[[str], None]) -> None:
        """kill -9 the broker leading ``echo``'s partition 0 (written in open
        transactions all the time), then start it again."""
        if self.brokers is None:
            raise RuntimeError("leader kills need a cluster (--brokers 3)")
        leaders = await partition_leaders(self.config.bootstrap, "echo")
        node = leaders[self.random.randrange(len(leaders))]
        await asyncio.to_thread(self.brokers.kill, node)
        say(f"kill -9 of broker {node}, leader of a partition of echo")
        await asyncio.sleep(5.0)
        await asyncio.to_thread(self.brokers.start_node, node)
        self.result.leader_kills += 1

    async def _stop_driver(self, driver: subprocess.Popen[bytes]) -> None:
        # The driver's shutdown hook closes its producer, then prints what it wrote.
        driver.send_signal(signal.SIGTERM)
        await wait_exit(driver, 120.0)

    async def _drain(self) -> None:
        """Until group EosTest committed everything in ``data`` and ``repartition``."""
        lag = GroupLag(
            self.config.bootstrap,
            {GROUP_ID: topics.INPUTS},
            self.config.partitions,
            transactional=["repartition"],
        )
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while time.monotonic() < deadline:
            positions = await lag.positions()
            if positions is not None and all(behind == 0 for _, behind in positions.values()):
                return
            await asyncio.sleep(1.0)

    async def _verify(self, command: str) -> Verdict:
        started = time.monotonic()
        log_path = self.run_dir / f"{command}.log"
        proc = self._java(command, log_path)
        try:
            await asyncio.wait_for(asyncio.to_thread(proc.wait), VERIFY_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
        output = log_path.read_text(errors="replace")
        return verdict_of(command, output, time.monotonic() - started)
