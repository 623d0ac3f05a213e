"""What the REST API answers from, in the query process of ``eddy worker``.

It implements the API's backend (``api/backend.py``) as a worker does, from
other sources: the ingest processes' reports and their stores through secondary
instances for queries (``service/plane/stages.py``), their published counters
and metrics for ``/status`` and ``/metrics``, and calls to their private APIs for
operations (``service/plane/control.py``). Coordinating a snapshot, a savepoint
or a stop over the app's workers happens here, with this host's ingest processes
taking part as one worker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from eddy.app import queries
from eddy.app.app import BuiltApp
from eddy.app.plan import View
from eddy.app.queries import UnknownKeyError
from eddy.eventtime import MIN_WATERMARK, Clock
from eddy.jobs import Scope, whole_view
from eddy.metrics import Metrics
from eddy.operations import Operation, Operations
from eddy.plane.control import Control
from eddy.plane.metrics import merge_expositions
from eddy.plane.stages import LocalStage, Secondaries
from eddy.plane.status import COUNTERS
from eddy.plane.supervisor import Child
from eddy.savepoint.stop import AppStopper, Phase
from eddy.settings import Settings
from eddy.snapshot.catalog import Kind
from eddy.snapshot.take import take_everywhere
from eddy.worker import AgentReads, agent_of, stage_of


class QueryPlane(AgentReads):
    """The query process's :class:`eddy.api.backend.Backend` (and operations, jobs)."""

    def __init__(
        self,
        settings: Settings,
        built: BuiltApp,
        clock: Clock,
        children: Callable[[], Sequence[Child]],
        secondaries: Secondaries,
        endpoint: Callable[[], str],
    ) -> None:
        self.settings = settings
        self.built: BuiltApp = built
        self.clock = clock
        self.metrics = Metrics()  # REST latency; ingest's come from the processes
        self.operations = Operations(clock)
        self._children = children
        self._secondaries = secondaries
        self._pruned_at: tuple[Any, ...] = ()
        self._endpoint = endpoint
        self.control = Control(settings, children)
        self._stopper = AppStopper(
            settings, self._peers, self._take_savepoint, self._local_stop_phase
        )

    # -- what this host's ingest processes serve ----------------------------------------

    def _reports(self) -> list[Any]:
        found = []
        for child in self._children():
            if not child.running:
                continue
            report = child.report.current()
            if report is not None:
                found.append((child.report, child.report.seen, report))
        seen = tuple(identity for _, identity, _ in found)
        if seen != self._pruned_at:
            # Close the instances of stores no process serves any more (moved to
            # another host, or wiped): they hold deleted files open.
            self._pruned_at = seen
            self._secondaries.keep_only(
                {
                    part.path
                    for _, _, report in found
                    for stage in report.stages.values()
                    for part in stage.partitions.values()
                    if part.state == "running"
                }
            )
        return found

    def _stage(self, name: str) -> LocalStage:
        return LocalStage(name, self._reports(), self._secondaries, self._endpoint())

    def _served(self, stage: str) -> LocalStage:
        return self._stage(stage)

    def _stage_names(self) -> list[str]:
        return sorted({name for _, _, report in self._reports() for name in report.stages})

    # -- Backend --------------------------------------------------------------------------

    @property
    def worker_id(self) -> str:
        return self.settings.worker_id

    @property
    def max_results(self) -> int:
        return self.settings.api_max_results

    def is_live(self) -> bool:
        """Every running ingest process's loops run. One that died is not a reason to
        restart the pod: the supervisor starts it again (readiness says it is down)."""
        reports = [c.report.current() for c in self._children() if c.running]
        return all(r is None or r.live for r in reports)

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        children = self._children()
        reports = [c.report.current() for c in children if c.running]
        ready = len(reports) == len(children) and all(
            r is not None and r.started and r.ready and r.live for r in reports
        )
        detail = {}
        for name in self._stage_names():
            stage = self._stage(name)
            detail[name] = {
                "agent": self.agent_of(name),
                "ready": bool(stage.stages) and all(s.ready for s in stage.stages),
                "partitions": stage.served(),
                "restoring": stage.restoring_here(),
            }
        return ready, detail

    def views(self) -> list[View]:
        return self.built.views

    def agents(self) -> dict[str, list[str]]:
        return {a: [s.name for s in c.stages] for a, c in self.built.agents.items()}

    def remote_owners(self, agent: str) -> dict[str, list[int]]:
        return queries.remote_owners(self._stage(stage_of(self.built, agent)))

    def stages(self) -> dict[str, list[str]]:
        return {name: queries.table_names(self._stage(name)) for name in self._stage_names()}

    def agent_of(self, stage: str) -> str:
        return agent_of(self.built, stage)

    def table_entries(
        self, stage: str, table: str, key: str, from_ms: int, to_ms: int, limit: int
    ) -> queries.TablePage:
        if stage not in self._stage_names():
            raise UnknownKeyError(f"{stage!r} does not run on this worker")
        return queries.table_entries(self._stage(stage), table, key, from_ms, to_ms, limit)

    def watermarks(self) -> dict[str, dict[int, int]]:
        found = {}
        for name in self._stage_names():
            running = self._stage(name).running()
            found[name] = {
                p: MIN_WATERMARK if part.watermark_ms is None else part.watermark_ms
                for p, part in running.items()
            }
        return found

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def metrics_text(self) -> tuple[bytes, str]:
        texts = [generate_latest(self.metrics.registry).decode()]
        for child in self._children():
            if child.running:
                try:
                    texts.append(child.metrics_path.read_text())
                except FileNotFoundError:
                    continue  # starting: no metrics written yet
        return merge_expositions(texts), CONTENT_TYPE_LATEST

    def status(self) -> dict[str, Any]:
        now_ms = self.clock.now_ms()
        stages = {}
        for name in self._stage_names():
            stage = self._stage(name)
            marks = [p.watermark_ms for p in stage.running().values() if p.watermark_ms]
            counters = dict.fromkeys(COUNTERS, 0.0)
            for each in stage.stages:
                for field in COUNTERS:
                    counters[field] += each.counters.get(field, 0.0)
            stages[name] = {
                "agent": self.agent_of(name),
                "ready": bool(stage.stages) and all(s.ready for s in stage.stages),
                "partitions": stage.served(),
                "restoring": stage.restoring_here(),
                "watermarks_ms": {
                    str(p): part.watermark_ms
                    for p, part in stage.running().items()
                    if part.watermark_ms is not None
                },
                "min_watermark_lag_ms": now_ms - max(marks) if marks else None,
                "max_watermark_lag_ms": now_ms - min(marks) if marks else None,
                **counters,
            }
        return {"worker_id": self.worker_id, "now_ms": now_ms, "stages": stages}

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.metrics.http_seconds.labels(route, method, str(status)).observe(seconds)

    # -- operations: coordinated here, with this host's processes as one worker ---------

    def _peers(self) -> set[str]:
        """Other workers' endpoints (query processes, or workers of one process)."""
        me = self._endpoint()
        owners = {
            url
            for name in self._stage_names()
            for url in self._stage(name).owners().values()
            if url is not None
        }
        return owners - {me}

    def start_snapshot(self, kind: Kind) -> Operation:
        return self.operations.start(kind, lambda: self._take_everywhere(kind))

    async def _take_everywhere(self, kind: Kind) -> dict[str, Any]:
        async def here(snapshot_id: str) -> dict[str, Any]:
            return await self.control.part(kind, snapshot_id)

        return await take_everywhere(self.settings, kind, self.clock, here, self._peers())

    async def _take_savepoint(self) -> dict[str, Any]:
        return await self._take_everywhere("savepoint")

    def start_stop(self, savepoint: bool) -> Operation:
        return self.operations.start("stop", lambda: self._stopper.stop(savepoint=savepoint))

    async def take_part(self, kind: Kind, snapshot_id: str) -> dict[str, Any]:
        return await self.control.part(kind, snapshot_id)

    async def stop_phase(self, phase: Phase) -> dict[str, Any]:
        return await self._local_stop_phase(phase)

    async def _local_stop_phase(self, phase: Phase) -> dict[str, Any]:
        # "exit": the processes leave their groups and exit 0; the supervisor then
        # stops this process too (service/plane/front.py).
        return await self.control.stop_phase(phase)

    async def jobs(self, scope: Scope) -> dict[str, Any]:
        local = await self.control.jobs(self.clock.now_ms(), self._endpoint())
        if scope == "local":
            return local
        owners = {name: self._stage(name).owners() for name in self._stage_names()}
        return await whole_view(self.settings, local, owners)
