"""The operations view (``GET /jobs``, ``python -m eddy status``): every
stage's partitions across the app (each stage with its agent), with owner,
state, lag, watermark, last commit and latency, plus the newest savepoint and
snapshot.

A worker only knows its own partitions' progress; the group assignment tells it
who owns the others (``PipelineRuntime.owner_of``). So the worker asked answers
for its partitions and asks each peer for theirs (``GET /jobs?scope=local``, the
same REST hop as query forwarding and snapshots), then merges. A peer that does
not answer does not fail the answer: its partitions show their owner and the
state ``unreachable`` with the error, because that is exactly when an operator
looks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

import httpx

from eddy.errors import EddyError
from eddy.eventtime import MIN_WATERMARK, Clock
from eddy.runtime.engine import PipelineRuntime
from eddy.settings import Settings
from eddy.snapshot.layout import SnapshotRoot

log = logging.getLogger(__name__)

Scope = Literal["all", "local"]
Answer = dict[str, Any]
# A peer that takes longer is shown as unreachable: an operator is waiting.
PEER_TIMEOUT_S = 5.0


class JobsView:
    """Builds this worker's part of the view and, for ``scope="all"``, the whole."""

    def __init__(
        self,
        settings: Settings,
        runtimes: Callable[[], Mapping[str, PipelineRuntime]],
        clock: Clock,
        endpoint: Callable[[], str],
        agent_of: Callable[[str], str] = str,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """Args:
        agent_of: the agent a stage is part of (default: the stage's own name).
        """
        self.settings = settings
        self._runtimes = runtimes
        self._clock = clock
        self._endpoint = endpoint
        self._agent_of = agent_of
        self._transport = transport  # tests pass an httpx.MockTransport

    async def answer(self, scope: Scope) -> Answer:
        local = await self.local()
        if scope == "local":
            return local
        owners = {
            name: {p: rt.owner_of(p) for p in range(rt.partition_count)}
            for name, rt in self._runtimes().items()
        }
        return await whole_view(self.settings, local, owners, self._transport)

    async def local(self) -> Answer:
        """This worker's partitions (open or being opened), nothing else."""
        me = {"worker_id": self.settings.worker_id, "endpoint": self._endpoint()}
        stages = []
        for name, runtime in self._runtimes().items():
            partitions = sorted(set(runtime.tasks) | runtime.restoring)
            rows = [await _row(runtime, p, me) for p in partitions]
            stages.append(
                {
                    "stage": name,
                    "agent": self._agent_of(name),
                    "inputs": list(runtime.pipeline.sources),
                    "partition_count": runtime.partition_count,
                    "partitions": rows,
                }
            )
        return {
            "app_id": self.settings.app_id,
            "served_by": self.settings.worker_id,
            "now_ms": self._clock.now_ms(),
            "complete": False,
            "workers": [{**me, "reachable": True, "error": None}],
            "stages": stages,
            "last_savepoint": None,
            "last_snapshot": None,
            "errors": [],
        }


async def whole_view(
    settings: Settings,
    local: Answer,
    owners: Mapping[str, Mapping[int, str | None]],
    transport: httpx.AsyncBaseTransport | None = None,
) -> Answer:
    """Every worker's partitions: ``local`` (this worker's, or this host's ingest
    processes') and each peer's, as the group's assignment (``owners``: per stage,
    each partition's owner endpoint) names them, plus the newest cuts."""
    me = local["workers"][0]["endpoint"]
    peers = sorted({e for by in owners.values() for e in by.values() if e and e != me})
    answers = await asyncio.gather(*(ask_peer(settings, peer, transport) for peer in peers))
    merged = merge(local, dict(zip(peers, answers, strict=True)), owners)
    errors: list[str] = merged["errors"]
    for key, uri in (
        ("last_savepoint", settings.savepoint_root),
        ("last_snapshot", settings.snapshot_root),
    ):
        try:
            merged[key] = await asyncio.to_thread(newest_cut, uri, settings.app_id)
        except (OSError, ValueError, KeyError, EddyError) as exc:
            errors.append(f"{key.removeprefix('last_')} root {uri} unreadable: {exc}")
    return merged


async def ask_peer(
    settings: Settings, peer: str, transport: httpx.AsyncBaseTransport | None = None
) -> Answer | str:
    """A peer's local part (``GET /jobs?scope=local``), or why there is none."""
    token = settings.api_token  # workers of one app share it
    headers = {"Authorization": f"Bearer {token.get_secret_value()}"} if token else {}
    try:
        async with httpx.AsyncClient(
            timeout=PEER_TIMEOUT_S, headers=headers, transport=transport
        ) as client:
            response = await client.get(f"{peer}/jobs", params={"scope": "local"})
    except httpx.HTTPError as exc:
        log.info("jobs: the worker at %s does not answer: %r", peer, exc)
        return f"does not answer: {exc!r}"
    if response.status_code != 200:
        return f"answered {response.status_code}: {response.text[:200]}"
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if not is_local_part(answer):
        return "answered something that is not a jobs view (another version?)"
    return dict(answer)


def is_local_part(answer: Any) -> bool:
    """Whether a peer's answer has what :func:`merge` reads."""
    return (
        isinstance(answer, dict)
        and isinstance(answer.get("workers"), list)
        and bool(answer["workers"])
        and isinstance(answer["workers"][0], dict)
        and isinstance(answer.get("stages"), list)
        and all(
            isinstance(s, dict) and {"stage", "partitions"} <= s.keys() for s in answer["stages"]
        )
    )


async def _row(runtime: PipelineRuntime, partition: int, owner: dict[str, Any]) -> Answer:
    task = runtime.tasks.get(partition)
    restoring = partition in runtime.restoring or task is None
    row = partition_row(partition, owner, "restoring" if restoring else "running")
    if task is None:
        return row
    inputs = await runtime.inputs(partition)
    known = [i.lag for i in inputs if i.lag is not None]
    watermark = task.logic.watermark_ms
    row.update(
        committed_offsets={i.topic: i.committed_offset for i in inputs},
        end_offsets={i.topic: i.end_offset for i in inputs},
        lag=sum(known) if inputs and len(known) == len(inputs) else None,
        watermark_ms=None if watermark == MIN_WATERMARK else watermark,
        last_commit_ms=runtime.last_commit_ms.get(partition),
        latency_ms=runtime.markers.latest_ms(partition),
        records_in=task.records_in,
        records_out=task.records_out,
    )
    return row


def partition_row(
    partition: int, owner: dict[str, Any] | None, state: str, error: str | None = None
) -> Answer:
    """A partition with nothing known but its owner and state."""
    return {
        "partition": partition,
        "owner": owner,
        "state": state,
        "error": error,
        "committed_offsets": {},
        "end_offsets": {},
        "lag": None,
        "watermark_ms": None,
        "last_commit_ms": None,
        "latency_ms": None,
        "records_in": None,
        "records_out": None,
    }


def merge(
    local: Answer,
    peers: Mapping[str, Answer | str],
    owners: Mapping[str, Mapping[int, str | None]],
) -> Answer:
    """One view of every partition from this worker's part and its peers' parts.

    Args:
        local: this worker's ``scope=local`` answer.
        peers: each peer's endpoint -> its ``scope=local`` answer, or why it has none.
        owners: per stage, each partition's owner endpoint by the group assignment
            as this worker knows it (None while unknown).

    A partition is taken from the worker that reports it (this one first, then its
    assigned owner, then any peer: the assignment may be a rebalance behind); one
    nobody reports is ``unreachable`` when its owner did not answer, else
    ``unassigned``.
    """
    answered = {e: a for e, a in peers.items() if not isinstance(a, str)}
    reported: dict[tuple[str, int], dict[str, Any]] = {}
    shapes: dict[str, dict[str, Any]] = {}
    for answer in [local, *answered.values()]:
        for stage in answer["stages"]:
            shapes.setdefault(stage["stage"], stage)
            for row in stage["partitions"]:
                reported.setdefault((stage["stage"], row["partition"]), row)
    stages = []
    for name, shape in shapes.items():
        assigned = owners.get(name, {})
        rows = []
        for partition in range(shape["partition_count"]):
            row = reported.get((name, partition))
            if row is None:
                row = _missing(partition, assigned.get(partition), peers)
            rows.append(row)
        stages.append({**shape, "partitions": rows})
    workers = list(local["workers"])
    for endpoint, part in sorted(peers.items()):
        if isinstance(part, str):
            workers.append(
                {"worker_id": None, "endpoint": endpoint, "reachable": False, "error": part}
            )
        else:  # several when the peer runs several ingest processes (one endpoint)
            workers += [{**worker, "endpoint": endpoint} for worker in part["workers"]]
    complete = all(r["state"] in ("running", "restoring") for s in stages for r in s["partitions"])
    return {
        **local,
        "complete": complete,
        "workers": workers,
        "stages": stages,
        "errors": list(local["errors"]),
    }


def _missing(partition: int, owner: str | None, peers: Mapping[str, Answer | str]) -> Answer:
    if owner is None:
        return partition_row(partition, None, "unassigned", "no owner yet (rebalancing)")
    answer = peers.get(owner)
    if isinstance(answer, str):
        where = {"worker_id": None, "endpoint": owner}
        return partition_row(partition, where, "unreachable", f"the worker at {owner} {answer}")
    return partition_row(
        partition,
        None,
        "unassigned",
        f"assigned to the worker at {owner}, which does not report it (rebalancing?)",
    )


def newest_cut(uri: str, app_id: str) -> dict[str, Any] | None:
    """The newest complete snapshot (or savepoint: same layout) under ``uri``."""
    root = SnapshotRoot.open(uri)
    manifests = root.manifests(app_id)
    if not manifests:
        return None
    newest = manifests[-1]
    return {
        "id": newest["snapshot_id"],
        "created_ms": newest["created_ms"],
        "location": root.url_of(root.snapshot_dir(app_id, newest["snapshot_id"])),
    }
