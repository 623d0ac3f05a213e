"""The query plane's calls to its ingest processes' private APIs: the operations
that act on ingest (snapshot and savepoint parts, the phases of a stop) and the
jobs view (lags need each process's consumer). Queries never come this way.

Each answer for the whole host is merged from the processes' answers, so a peer
(or a client) sees one worker per host, as it did when a worker was one process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from eddy.jobs import is_local_part
from eddy.plane.supervisor import Child
from eddy.settings import Settings

log = logging.getLogger(__name__)
Answer = dict[str, Any]
# A peer asking for a snapshot part waits snapshot_timeout_ms; a jobs view, 5 s.
JOBS_TIMEOUT_S = 4.0
STOP_TIMEOUT_S = 25.0


class Control:
    """Fans a call out to every running ingest process and gathers the answers."""

    def __init__(self, settings: Settings, children: Callable[[], Sequence[Child]]) -> None:
        self._settings = settings
        self._children = children
        token = settings.api_token
        headers = {"Authorization": f"Bearer {token.get_secret_value()}"} if token else {}
        self._client = httpx.AsyncClient(headers=headers)

    async def close(self) -> None:
        await self._client.aclose()

    async def each(
        self, method: str, path: str, timeout_s: float, params: dict[str, str] | None = None
    ) -> list[tuple[Child, Answer | str]]:
        """Every running process's JSON answer, or why there is none."""
        children = [c for c in self._children() if c.running]

        async def one(child: Child) -> Answer | str:
            report = child.report.current()
            url = None if report is None else report.control_url
            if url is None:
                return "is starting (no API yet)"
            try:
                response = await self._client.request(
                    method, url + path, params=params, timeout=timeout_s
                )
            except httpx.HTTPError as exc:
                return f"does not answer: {exc!r}"
            if response.status_code >= 400:
                return f"answered {response.status_code}: {response.text[:200]}"
            try:
                body: Answer = response.json()
            except ValueError:
                return "answered something that is not JSON"
            return body

        answers = await asyncio.gather(*(one(child) for child in children))
        return list(zip(children, answers, strict=True))

    async def part(self, kind: str, snapshot_id: str) -> Answer:
        """This host's part of a snapshot or savepoint: every process's partitions."""
        timeout_s = self._settings.snapshot_timeout_ms / 1000
        answers = await self.each("POST", f"/internal/{kind}s/{snapshot_id}", timeout_s)
        partitions: list[Answer] = []
        errors = []
        for child, answer in answers:
            if isinstance(answer, str):
                errors.append(f"ingest process {child.index} {answer}")
            else:
                partitions += answer.get("partitions", [])
        part: Answer = {"worker_id": self._settings.worker_id, "partitions": partitions}
        if errors:
            log.warning("%s %s: %s", kind, snapshot_id, "; ".join(errors))
            part["error"] = "; ".join(errors)
        return part

    async def stop_phase(self, phase: str) -> Answer:
        """A phase of a stop in every process of this host."""
        answers = await self.each("POST", f"/internal/stop/{phase}", STOP_TIMEOUT_S)
        failed = [f"ingest process {c.index} {a}" for c, a in answers if isinstance(a, str)]
        answer: Answer = {"worker_id": self._settings.worker_id, "phase": phase}
        if failed:
            answer["error"] = "; ".join(failed)
        return answer

    async def jobs(self, now_ms: int, endpoint: str) -> Answer:
        """This host's part of the jobs view: every process's partitions, as one part."""
        answers = await self.each("GET", "/jobs", JOBS_TIMEOUT_S, {"scope": "local"})
        return merge_local_parts(
            self._settings, [a for _, a in answers if is_local_part(a)], now_ms, endpoint
        ) | {"errors": [f"ingest process {c.index} {a}" for c, a in answers if isinstance(a, str)]}


def merge_local_parts(settings: Settings, parts: list[Any], now_ms: int, endpoint: str) -> Answer:
    """Several processes' ``scope=local`` jobs views as one (per stage, every
    process's partitions in order)."""
    stages: dict[str, Answer] = {}
    workers: list[Answer] = []
    for part in parts:
        workers += part["workers"]
        for stage in part["stages"]:
            merged = stages.setdefault(stage["stage"], {**stage, "partitions": []})
            merged["partitions"] = sorted(
                [*merged["partitions"], *stage["partitions"]], key=lambda r: r["partition"]
            )
    return {
        "app_id": settings.app_id,
        "served_by": settings.worker_id,
        "now_ms": now_ms,
        "complete": False,
        "workers": workers or [{"worker_id": settings.worker_id, "endpoint": endpoint,
                                "reachable": True, "error": None}],
        "stages": list(stages.values()),
        "last_savepoint": None,
        "last_snapshot": None,
        "errors": [],
    }  # fmt: skip
