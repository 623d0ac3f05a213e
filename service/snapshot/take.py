"""A worker's side of snapshots: cut, export, publish; on demand, periodically, and
fanned out to the other workers of the app.

On-demand snapshots travel over the workers' REST APIs (``POST /snapshots``):
every worker already serves one, already knows its peers' endpoints from the
group assignment (queries are forwarded the same way), and the caller gets the
outcome in the response. A Kafka control topic would need a new topic, a reply
channel and a way to know when everyone answered. Periodic snapshots need no
messages at all: every worker snapshots at the same wall-clock slot
(``EDDY_SNAPSHOT_INTERVAL_MS``) under the id of that slot.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Literal

import httpx

from eddy.eventtime import MIN_WATERMARK, Clock
from eddy.runtime.engine import PipelineRuntime
from eddy.runtime.task import Task
from eddy.settings import Settings
from eddy.snapshot.layout import SnapshotRoot, check_id, snapshot_id_at
from eddy.snapshot.publish import PartitionCut, Published, complete, export_partition
from eddy.tables.schema import schema_for

log = logging.getLogger(__name__)


class Snapshotter:
    """Takes this worker's part of snapshots, one at a time."""

    def __init__(
        self,
        settings: Settings,
        runtimes: Callable[[], Mapping[str, PipelineRuntime]],
        clock: Clock,
        *,
        kind: Literal["snapshot", "savepoint"] = "snapshot",
    ) -> None:
        self.settings = settings
        self.kind = kind
        savepoint = kind == "savepoint"
        self.root = SnapshotRoot.open(
            settings.savepoint_root if savepoint else settings.snapshot_root, kind
        )
        # Savepoints are the operator's to delete (docs/savepoints.md), never pruned.
        self._retain = None if savepoint else settings.snapshot_retain
        self._runtimes = runtimes
        self._clock = clock
        self._lock = asyncio.Lock()
        # The app id names folders here and under the root: "." or ".." would be
        # the state folder's parent, which discard_leftovers empties.
        self.root.app_dir(settings.app_id)
        self._scratch = Path(settings.state_dir) / settings.app_id / f".{kind}s"

    async def take(self, snapshot_id: str | None = None) -> Published:
        """Cut every partition this worker owns at a commit boundary, export the cut
        and publish the manifest if that completed the snapshot."""
        snapshot_id = check_id(snapshot_id or snapshot_id_at(self._clock.now_ms()))
        async with self._lock:
            scratch = self._scratch / snapshot_id
            shutil.rmtree(scratch, ignore_errors=True)
            try:
                cuts: list[PartitionCut] = []
                for runtime in self._runtimes().values():
                    taken = await runtime.at_commit_boundary(partial(self._cut, runtime, scratch))
                    for cut in taken:
                        cut.end_offsets.update(await _ends(runtime, cut))
                    cuts += taken
                return await asyncio.to_thread(self._publish, snapshot_id, cuts)
            finally:
                await _finish(asyncio.to_thread(shutil.rmtree, scratch, True))

    async def discard_leftovers(self) -> None:
        """Remove the cuts of snapshots a killed worker left half-taken: their hard
        links would keep the store's old files on disk for good."""
        await asyncio.to_thread(shutil.rmtree, self._scratch, True)

    def _cut(
        self, runtime: PipelineRuntime, scratch: Path, tasks: Mapping[int, Task]
    ) -> list[PartitionCut]:
        # Under the runtime's lock, right after its commit: keep this short (a
        # checkpoint is hard links and a memtable flush); the export comes later.
        cuts = []
        schemas = runtime.pipeline.state_schemas
        for partition, task in sorted(tasks.items()):
            path = scratch / runtime.name / str(partition)
            task.store.checkpoint(path)
            watermark = task.logic.watermark_ms
            versions = {
                table: schema.version
                for table in task.store.table_names()
                if (schema := schema_for(schemas, table)) is not None
            }
            cuts.append(
                PartitionCut(
                    pipeline=runtime.name,
                    partition=partition,
                    path=path,
                    committed_offsets={tp.topic: o for tp, o in task.committed_offsets.items()},
                    watermark_ms=None if watermark == MIN_WATERMARK else watermark,
                    changelog_offset=task.store.changelog_offset(),
                    taken_ms=self._clock.now_ms(),
                    partition_count=runtime.partition_count,
                    table_versions=versions,
                )
            )
        return cuts

    def _publish(self, snapshot_id: str, cuts: list[PartitionCut]) -> Published:
        app, worker = self.settings.app_id, self.settings.worker_id
        started = time.perf_counter()
        published = Published(snapshot_id)
        for cut in cuts:
            published.parts.append(export_partition(self.root, app, snapshot_id, worker, cut))
        rows = sum(p["rows"] for p in published.parts)
        log.info(
            "%s %s: exported %d partitions, %d rows in %.2fs",
            self.kind,
            snapshot_id,
            len(cuts),
            rows,
            time.perf_counter() - started,
        )
        published.manifest, published.missing = complete(
            self.root, app, snapshot_id, self._retain, self.kind
        )
        return published

    async def part(self, snapshot_id: str) -> dict[str, Any]:
        """This worker's part of ``snapshot_id`` (a peer asked for it)."""
        return await self._answer(self.take(check_id(snapshot_id)))

    async def take_everywhere(self, snapshot_id: str | None = None) -> dict[str, Any]:
        """This worker's part and every peer's, under one id."""
        return await take_everywhere(
            self.settings, self.kind, self._clock, self.part, self.peers(), snapshot_id
        )

    async def _answer(self, taking: Any) -> dict[str, Any]:
        published: Published = await taking
        return {
            "worker_id": self.settings.worker_id,
            "partitions": [
                {"stage": p["pipeline"], "partition": p["partition"], "rows": p["rows"]}
                for p in published.parts
            ],
        }

    def peers(self) -> set[str]:
        """REST endpoints of the app's other workers, as of the last rebalance."""
        me = next(iter(self._runtimes().values()), None)
        endpoints = {
            owner
            for runtime in self._runtimes().values()
            for partition in range(runtime.partition_count)
            if (owner := runtime.owner_of(partition)) is not None
        }
        return endpoints - {me.endpoint if me is not None else None}

    async def run_periodic(self) -> None:
        """Snapshot at every multiple of the interval (wall clock), until cancelled.

        Every worker of the app wakes at the same slot and uses the slot's id, so
        their parts add up to one snapshot without any message between them."""
        interval_ms = self.settings.snapshot_interval_ms
        while True:
            now_ms = self._clock.now_ms()
            slot_ms = (now_ms // interval_ms + 1) * interval_ms
            await asyncio.sleep((slot_ms - now_ms) / 1000)
            try:
                published = await self.take(snapshot_id_at(slot_ms))
            except Exception as exc:  # a failed snapshot must not stop the worker
                log.warning("periodic snapshot failed: %r", exc)
                continue
            if published.manifest is None:
                log.info(
                    "snapshot %s: part written; waiting for %d other partitions",
                    published.snapshot_id,
                    len(published.missing),
                )


async def _finish(cleanup: Awaitable[None]) -> None:
    """Run ``cleanup`` to its end even if the caller is cancelled meanwhile (a worker
    stopping): a cut left behind holds hard links to the store's files."""
    running = asyncio.ensure_future(cleanup)
    try:
        await asyncio.shield(running)
    except asyncio.CancelledError:
        await running
        raise


async def take_everywhere(
    settings: Settings,
    kind: Literal["snapshot", "savepoint"],
    clock: Clock,
    local_part: Callable[[str], Awaitable[dict[str, Any]]],
    peers: Iterable[str],
    snapshot_id: str | None = None,
) -> dict[str, Any]:
    """Take a snapshot (or savepoint) everywhere under one id: this worker's part
    (``local_part``: a worker's own, or the query plane's ingest processes') and
    every peer's, over their REST APIs; then whether that completed it."""
    snapshot_id = check_id(snapshot_id or snapshot_id_at(clock.now_ms()))
    savepoint = kind == "savepoint"
    root = SnapshotRoot.open(settings.savepoint_root if savepoint else settings.snapshot_root, kind)
    results = await asyncio.gather(
        local_part(snapshot_id),
        *(_ask(settings, kind, peer, snapshot_id) for peer in sorted(peers)),
    )
    # Another worker may have finished last and published; look again.
    manifest, missing = await asyncio.to_thread(
        complete,
        root,
        settings.app_id,
        snapshot_id,
        None if savepoint else settings.snapshot_retain,
        kind,
    )
    return {
        "id": snapshot_id,
        "complete": manifest is not None,
        "missing": missing,
        "location": root.url_of(root.snapshot_dir(settings.app_id, snapshot_id)),
        "rows": None if manifest is None else manifest["rows"],
        "workers": results,
    }


async def _ask(
    settings: Settings, kind: Literal["snapshot", "savepoint"], peer: str, snapshot_id: str
) -> dict[str, Any]:
    timeout_s = settings.snapshot_timeout_ms / 1000
    url = f"{peer}/internal/{kind}s/{snapshot_id}"
    try:
        return await post_to_peer(settings, url, {}, timeout_s)
    except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
        log.warning("%s %s: worker at %s did not take its part: %r", kind, snapshot_id, peer, exc)
        return {"worker": peer, "error": repr(exc), "partitions": []}


async def _ends(runtime: PipelineRuntime, cut: PartitionCut) -> dict[str, int]:
    """Where each input of the cut's partition ends, as a reader that consumed it all
    sees it (transaction markers after the last record do not count): read just
    after the cut, so at least the end at the cut. A savepoint whose inputs ended
    at its offsets left nothing unprocessed, and may move to more partitions."""
    ends = {}
    for progress in await runtime.inputs(cut.partition):
        if progress.lag is not None:
            ends[progress.topic] = progress.committed_offset + progress.lag
    return ends


async def post_to_peer(
    settings: Settings, url: str, body: dict[str, Any], timeout_s: float
) -> dict[str, Any]:
    """POST ``body`` to another worker of the app (which shares the API token).

    Raises:
        httpx.HTTPError: unreachable, or an error status.
    """
    token = settings.api_token
    headers = {"Authorization": f"Bearer {token.get_secret_value()}"} if token else {}
    async with httpx.AsyncClient(timeout=timeout_s, headers=headers) as client:
        response = await client.post(url, json=body)
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    return answer
