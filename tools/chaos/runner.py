"""One chaos run, start to verdict (docs/chaos.md).

Fresh application id and topic prefix per run; W workers running the agents of
the reference app (``eddy.examples.app``) and the checker; the input produced at a
steady pace while the schedule's faults fire; then a drain (every worker alive
and ready, every stage's consumer group committed up to the end of its input,
stable for a few seconds); then the checks of ``tools.chaos.verify`` on what
``read_committed`` readers see, the REST answers, and open-transaction markers.
Everything lands in ``$EDDY_HOME/chaos/<run-id>/`` (or under ``--out``):
``schedule.json`` (replayable), ``results.json``, one log per worker incarnation.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from eddy.errors import EddyError
from eddy.examples import app
from eddy.paths import eddy_home
from eddy.settings import Settings, load_settings
from eddy.topics import ensure_topics
from tools import localkafka
from tools.chaos import reference, rest, workload
from tools.chaos.cluster import Cluster, WorkerDown, excerpt
from tools.chaos.errors import ChaosError
from tools.chaos.faults import Finding, Injector, LeaderKills
from tools.chaos.kafkaio import Feeder, GroupLag, LiveReader, check_markers, delete_topics
from tools.chaos.kafkaio import read_topics as read
from tools.chaos.recompute import checker_aggregates
from tools.chaos.report import RunResult, percentiles
from tools.chaos.schedule import ABORTING_KINDS, FaultKind, Schedule, save
from tools.chaos.verify import (
    CHECKER,
    SENSORS,
    Check,
    check_aggregates,
    check_dead_letters,
    check_echo,
    check_late,
    check_ledger,
    check_readers,
    check_windows,
    checker_rows,
    is_malformed,
    sensor_expectation,
)
from tools.localkafka.cluster import Brokers

if TYPE_CHECKING:
    from tools.fleet.faults import NetworkFaults
    from tools.fleet.hosts import Fleet

DRAIN_TIMEOUT_S = 240.0
DRAIN_STABLE_S = 3.0


def run_settings(schedule: Schedule, tag: str, run_dir: Path) -> Settings:
    """The run's framework settings: every topic of the run under ``chaos-<tag>-``
    (the dead letters too), its own app id, so its groups, changelogs and the
    repartition topic are its own."""
    cfg = schedule.config
    return load_settings(
        app.settings_classes(),  # the agents' variables may be set: not misspelt ones
        app="eddy.examples:app",
        app_id=f"chaos-{tag}",
        topic_prefix=f"chaos-{tag}-",
        agents=reference.run_agents(),
        # Never declare a (killed, stopped) upstream task idle: hashtag_counts would
        # move on without it and drop its records as late, depending on timing.
        upstream_idle_timeout_ms=0,
        processing_guarantee=cfg.guarantee,
        commit_interval_ms=cfg.commit_interval_ms,
        session_timeout_ms=cfg.session_timeout_ms,
        transaction_timeout_ms=cfg.transaction_timeout_ms,
        window_firings_per_checkpoint=cfg.window_firings_per_checkpoint,
        partitions=cfg.partitions,
        state_dir=run_dir / "state",
        api_port=0,
        worker_id="chaos-harness",
    )


class ChaosRun:
    def __init__(
        self,
        schedule: Schedule,
        *,
        expect_duplicates: bool = False,
        root: Path | None = None,
        console: Console | None = None,
        keep_topics: bool = False,
        brokers: Brokers | None = None,
        fleet: Fleet | None = None,
    ) -> None:
        cfg = schedule.config
        self.fleet = fleet  # hosts of their own: the workers run in its namespaces
        if fleet is not None:
            brokers = fleet.brokers
        self.brokers = brokers  # a cluster: broker faults kill a partition leader
        tag = uuid.uuid4().hex[:8]
        self.run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-seed{cfg.seed}-{tag}"
        self.run_dir = ((root or eddy_home() / "chaos") / self.run_id).resolve()
        self.schedule = schedule
        self.console = console or Console(stderr=True)
        self.keep_topics = keep_topics
        self.settings = run_settings(schedule, tag, self.run_dir)
        self.plan = reference.Plan.of(self.settings)
        self.topics = self.plan.checker_topics()
        self.base_ms = workload.recent_base_ms()
        self.workload = workload.build(
            cfg.seed,
            cfg.records,
            cfg.keys,
            cfg.readings,
            cfg.sensors,
            self.base_ms,
            self.plan.sensor.watermark_bound_ms,
            cfg.partitions,
        )
        self.messages = self.workload.interleaved()
        self.result = RunResult(self.run_id, self.run_dir, schedule, expect_duplicates)
        self.result.notes.append(f"sensor event time starts at {self.base_ms} ms")
        self._stage_started = time.monotonic()

    @property
    def bootstrap(self) -> str:
        return self.settings.bootstrap_servers

    def _stage(self, name: str) -> None:
        now = time.monotonic()
        self.result.timings[name] = round(now - self._stage_started, 1)
        self._stage_started = now

    async def execute(self) -> RunResult:
        started = time.monotonic()
        broker_faults = FaultKind.BROKER in {f.kind for f in self.schedule.faults}
        if broker_faults and self.brokers is None and localkafka.running_pid() is None:
            raise ChaosError(
                "broker faults need eddy's own local broker: start it with "
                "`python -m tools kafka start`, run on a cluster (--brokers 3) "
                "or leave out --faults broker"
            )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        save(self.schedule, self.run_dir / "schedule.json")
        try:
            return await self._execute(started)
        except BaseException as exc:
            self.result.aborted = str(exc) or repr(exc)
            self.result.save()
            raise

    async def _execute(self, started: float) -> RunResult:
        cfg = self.schedule.config
        await self._create_topics()
        await self._feed_thresholds()
        cluster = Cluster(
            self.settings,
            self.run_dir,
            self.plan.stage_names,
            self.plan.worker_env(),
            placement=self.fleet,
        )
        try:
            for i in range(cfg.workers):
                cluster.spawn(f"w{i}")
            try:
                await cluster.wait_all_ready()
            except WorkerDown as exc:
                raise ChaosError(f"the workers did not start: {exc}; see {self.run_dir}") from None
            self._stage("setup")
            live = LiveReader(self.bootstrap, self.topics["echo"], cfg.partitions)
            live.keep_values = True
            stop_live = asyncio.Event()
            live_task = asyncio.create_task(live.run(stop_live))
            feeder = await self._feed_with_faults(cluster)
            self._stage("feed+faults")
            await self._drain(cluster)
            self._stage("drain")
            await self._stop_live(live, stop_live, live_task)
            self._echo_latency(live, feeder)
            await self._verify(cluster, live)
        finally:
            codes = await cluster.stop_all()
            self.result.crashes = cluster.crashes
            await cluster.close()
        logs = {w.name: w.log_path for w in cluster.workers.values()}
        for worker, code in codes.items():
            if code != 0:
                what = (
                    f"{worker} did not exit within 30 s of the final SIGTERM (SIGKILLed)"
                    if code is None
                    else f"{worker} exited {code} on the final SIGTERM"
                )
                path = logs.get(worker)
                self.result.findings.append(
                    Finding(None, what, str(path), excerpt(path) if path else [])
                )
        await self._markers()
        self._stage("verify")
        self.result.timings["total"] = round(time.monotonic() - started, 1)
        self.result.save()
        if self.result.passed and not self.keep_topics:
            await self._clean_up()
        return self.result

    async def _create_topics(self) -> None:
        try:
            await ensure_topics(self.settings, self.plan.topic_specs())
        except EddyError as exc:
            raise ChaosError(f"cannot create the run's topics: {exc}") from None

    async def _feed_thresholds(self) -> None:
        """Threshold updates before any worker runs: every task then has its broadcast
        state before the first reading, so threshold alerts do not depend on timing."""
        if not self.workload.thresholds:
            return
        topics = {"thresholds": self.plan.input_topics()["thresholds"]}
        await Feeder(self.bootstrap, topics, self.workload.thresholds, rate_per_s=1e6).run()

    async def _feed_with_faults(self, cluster: Cluster) -> Feeder:
        cfg = self.schedule.config
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
        )
        with Progress(*columns, console=self.console, transient=False) as progress:
            bar = progress.add_task(
                f"seed {cfg.seed} input", total=len(self.messages), status="starting"
            )
            feeder = Feeder(
                self.bootstrap,
                self.plan.input_topics(),
                self.messages,
                rate_per_s=len(self.messages) / cfg.feed_seconds,
                on_progress=lambda n: progress.update(bar, completed=n),
            )
            injector = Injector(
                cfg,
                self.schedule.faults,
                cluster,
                feeder,
                self._groups(),
                self.run_dir,
                on_change=lambda text: progress.update(bar, status=text),
                brokers=None
                if self.brokers is None
                else LeaderKills(self.brokers, self.topics["echo"]),
                network=self._network_faults(),
            )
            stop = asyncio.Event()
            supervisor = asyncio.create_task(cluster.supervise(stop))
            try:
                await asyncio.gather(feeder.run(), injector.run())
            finally:
                self.result.faults = injector.records
                self.result.findings.extend(injector.findings)
                stop.set()
                await supervisor
            if feeder.failed_sends:
                failed = feeder.failed_sends
                self.result.notes.append(f"{failed} input sends failed and were re-sent")
            progress.update(bar, status="draining")
        return feeder

    def _network_faults(self) -> NetworkFaults | None:
        if self.fleet is None:
            return None
        from tools.fleet.faults import NetworkFaults

        return NetworkFaults(self.fleet)

    def _leader_kills(self) -> LeaderKills | None:
        # The checker's echo: written in transactions by every task, all run long.
        return None if self.brokers is None else LeaderKills(self.brokers, self.topics["echo"])

    def _groups(self) -> GroupLag:
        """Every stage's consumer group (``<app_id>.<stage>``) and inputs."""
        return GroupLag(
            self.bootstrap,
            self.plan.groups(),
            self.schedule.config.partitions,
            self.plan.transactional_inputs(),
        )

    async def _drain(self, cluster: Cluster) -> None:
        """Until every worker is ready and every group committed all input, for a while."""
        groups = self._groups()
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        stable_since: float | None = None
        stop = asyncio.Event()
        supervisor = asyncio.create_task(cluster.supervise(stop))
        lag: dict[str, tuple[int, int]] | None = None
        ready: list[bool] = []
        try:
            while time.monotonic() < deadline:
                workers = cluster.alive()
                ready = list(await asyncio.gather(*(cluster.is_ready(w) for w in workers)))
                lag = await groups.positions()
                drained = lag is not None and all(behind == 0 for _, behind in lag.values())
                if drained and workers and all(ready):
                    stable_since = stable_since or time.monotonic()
                    if time.monotonic() - stable_since >= DRAIN_STABLE_S:
                        return
                else:
                    stable_since = None
                await asyncio.sleep(0.5)
        finally:
            stop.set()
            await supervisor
        self.result.findings.append(
            Finding(
                None,
                f"not drained after {DRAIN_TIMEOUT_S:.0f} s (stall): committed/behind per "
                f"group {lag}, workers ready {ready}",
                None,
                [line for w in cluster.alive() for line in [f"== {w.name}", *excerpt(w.log_path)]],
            )
        )

    async def _stop_live(
        self, live: LiveReader, stop: asyncio.Event, task: asyncio.Task[None]
    ) -> None:
        for _ in range(300):
            with contextlib.suppress(Exception):
                if await live.caught_up():
                    break
            await asyncio.sleep(0.2)
        stop.set()
        await task

    def _echo_latency(self, live: LiveReader, feeder: Feeder) -> None:
        index = {}
        for i, message in enumerate(self.messages):
            if message.stream == "checker" and message.value and not message.headers:
                index[orjson.loads(message.value)["id"]] = i
        seen: dict[int, float] = {}
        for at, value in live.values:
            record_id = orjson.loads(value or b"{}").get("id")
            if record_id in index and record_id not in seen:
                seen[record_id] = (at - feeder.sent_at[index[record_id]]) * 1000
        self.result.latency_ms = percentiles(list(seen.values()))

    async def _verify(self, cluster: Cluster, live: LiveReader) -> None:
        cfg = self.schedule.config
        s, plan = self.settings, self.plan
        sensor = plan.sensor
        n, echo = cfg.partitions, self.topics["echo"]
        sources = plan.input_topics()
        control = sources.pop("thresholds")
        inputs = await read(self.bootstrap, list(sources.values()), n, committed=False)
        inputs |= await read(self.bootstrap, [control], 1, committed=False)
        names = plan.output_topics()
        out = await read(self.bootstrap, names, n)
        # Every stage's outputs: a kill -9 or a zombie that lands mid-transaction
        # leaves aborted records in some of them (evidence the faults really hit).
        uncommitted = await read(self.bootstrap, names, n, committed=False)
        self.result.aborted_outputs = sum(len(uncommitted[t]) - len(out[t]) for t in names)

        outputs = plan.outputs()
        checker_in = inputs[self.topics["input"]]
        sensor_in = inputs[sources["sensor"]]
        rows = checker_rows(checker_in)
        expected = checker_aggregates(rows)
        sensors = sensor_expectation(sensor_in, sensor.window_size_ms, sensor.watermark_bound_ms)
        self.result.records = {
            CHECKER: len(checker_in),
            SENSORS: len(sensor_in),
        }
        dead = out[s.dead_letters]
        checks = [check_ledger(rows, cfg.records)]
        checks += check_echo(rows, out[echo])
        checks += check_aggregates(expected, out[self.topics["agg"]], out[self.topics["alerts"]])
        checks += check_dead_letters(CHECKER, self.topics["input"], checker_in, dead)
        checks.append(check_readers(out[echo], live.seen))
        checks += check_windows(sensors, out[outputs["averages"]], sensor.window_size_ms)
        checks += check_late(sensors, out[outputs["late"]])
        checks += check_dead_letters(SENSORS, sources["sensor"], sensor_in, dead)
        aborting = {f.kind for f in self.schedule.faults} & ABORTING_KINDS
        if s.exactly_once and aborting and self.result.aborted_outputs <= 0:
            # Evidence, not a guarantee: a kill between two commits finds no open
            # transaction with records. Lost/duplicated/wrong are the verdict.
            self.result.notes.append(
                "no aborted output records: no kill or zombie hit an open transaction "
                "with records in it (the faults themselves landed; see recovery times)"
            )
        ref = reference.verify(plan, inputs, out, dead)
        checks += ref.checks
        self.result.records |= ref.records
        self.result.notes += ref.notes
        checks += await rest.check_answers(cluster, expected, sensors)
        checks += await rest.check_reference_answers(
            cluster, ref.powerups_by_team, ref.counts_by_tag
        )
        self.result.checks = checks
        malformed = sum(is_malformed(r) for r in [*checker_in, *sensor_in])
        self.result.notes.append(f"{malformed} malformed inputs, {len(sensors.late)} late readings")

    async def _markers(self) -> None:
        names = [*self.plan.output_topics(), *self.plan.changelogs()]
        check = Check("no transaction left open (markers visible)", "run", "other")
        check.checked = len(names) * self.schedule.config.partitions
        try:
            stuck, seconds = await check_markers(
                self.bootstrap, names, self.schedule.config.partitions, self.run_id
            )
        except Exception as exc:
            stuck, seconds = [f"markers could not be written: {exc!r}"], 0.0
        for where in stuck:
            check.fail(f"{where} not visible to read_committed: a transaction is left open")
        self.result.checks.append(check)
        self.result.notes.append(f"markers visible after {seconds:.1f} s")

    async def _clean_up(self) -> None:
        names = [spec.name for spec in self.plan.topic_specs()] + self.plan.changelogs()
        with contextlib.suppress(Exception):
            await delete_topics(self.bootstrap, names)
        shutil.rmtree(self.run_dir / "state", ignore_errors=True)


async def run_chaos(schedule: Schedule, **options: Any) -> RunResult:
    return await ChaosRun(schedule, **options).execute()
