"""Stopping the app, optionally with a final savepoint (``stop --savepoint``).

As in Flink's stop-with-savepoint, processing stops before the savepoint is
taken, so the savepoint is the app's last state and resuming from it neither
repeats nor skips an output. The worker that receives ``POST /stop`` coordinates
over the workers' REST APIs:

1. **hold**: every worker stops processing but stays in its groups (so nothing
   rebalances, and the next step still finds every partition open);
2. **savepoint**: every partition is cut at a commit boundary (as any savepoint);
   if it comes out incomplete, every worker is released and keeps running;
3. **exit**: every worker commits (nothing new), leaves its groups and exits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal

import httpx

from eddy.errors import EddyError
from eddy.runtime.engine import PipelineRuntime
from eddy.savepoint import catalog
from eddy.settings import Settings
from eddy.snapshot.take import post_to_peer

log = logging.getLogger(__name__)
Phase = Literal["hold", "release", "exit"]
PEER_TIMEOUT_S = 30.0
# Time for the answer, and a client polling the stop operation, to get through
# before the worker shuts its API down.
EXIT_DELAY_S = 1.0


class SavepointIncompleteError(EddyError):
    """The final savepoint missed partitions; the app was left running."""


class AppStopper:
    """Coordinates a stop over every worker of the app (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        peers: Callable[[], Iterable[str]],
        take_savepoint: Callable[[], Awaitable[dict[str, Any]]],
        local: Callable[[Phase], Awaitable[dict[str, Any]]],
    ) -> None:
        """Args:
        peers: the other workers' API endpoints.
        take_savepoint: a savepoint of the whole app (this worker coordinating).
        local: runs a phase here: in a worker (:class:`LocalStop`), or in every
            ingest process of this host (the query plane).
        """
        self._settings = settings
        self._peers = peers
        self._take_savepoint = take_savepoint
        self._local = local

    async def stop(self, *, savepoint: bool) -> dict[str, Any]:
        """Coordinate every phase on every worker (see the module docstring).

        Raises:
            SavepointIncompleteError: the final savepoint missed partitions; the
                app was released and keeps running.
        """
        peers = sorted(self._peers())
        await self._everywhere("hold", peers)
        taken = None
        if savepoint:
            taken = await self._take_savepoint()
            if not taken["complete"]:
                await self._everywhere("release", peers)
                raise SavepointIncompleteError(
                    f"savepoint {taken['id']} is incomplete (no worker exported "
                    f"{', '.join(taken['missing'])}); the app keeps running: retry once it "
                    "is rebalanced"
                )
            await asyncio.to_thread(
                catalog.mark_stopped, self._settings, taken["id"], int(time.time() * 1000)
            )
        answers = await self._everywhere("exit", peers)
        return {"savepoint": taken, "workers": answers}

    async def _everywhere(self, phase: Phase, peers: list[str]) -> list[dict[str, Any]]:
        answers = await asyncio.gather(*(self._ask(peer, phase) for peer in peers))
        return [await self._local(phase), *answers]

    async def _ask(self, peer: str, phase: Phase) -> dict[str, Any]:
        url = f"{peer}/internal/stop/{phase}"
        try:
            return await post_to_peer(self._settings, url, {}, PEER_TIMEOUT_S)
        except (httpx.HTTPError, ValueError) as exc:
            # A worker that is gone needs no stopping; its partitions were cut by
            # whoever took them over (or the savepoint says they are missing).
            log.warning("stop: worker at %s did not answer %s: %r", peer, phase, exc)
            return {"worker": peer, "phase": phase, "error": repr(exc)}


class LocalStop:
    """One worker's part of each phase."""

    def __init__(
        self,
        settings: Settings,
        runtimes: Callable[[], Mapping[str, PipelineRuntime]],
        request_stop: Callable[[], None],
    ) -> None:
        self._settings = settings
        self._runtimes = runtimes
        self._request_stop = request_stop

    async def __call__(self, phase: Phase) -> dict[str, Any]:
        if phase in ("hold", "release"):
            for runtime in self._runtimes().values():
                runtime.hold(phase == "hold")
        elif phase == "exit":
            log.info("stop requested over the API: committing and leaving the group")
            asyncio.get_running_loop().call_later(EXIT_DELAY_S, self._request_stop)
        return {"worker_id": self._settings.worker_id, "phase": phase}
