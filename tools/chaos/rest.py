"""Queryable state after the drain: every worker asked about every key, on the
agents' generic routes (``/agents/<agent>/state/<state>/{key}`` for the checker's
aggregates, ``/agents/<agent>/windows/{key}`` for the windows of sensor_averages,
team_powerups and hashtag_counts).

The owner of a key's partition answers 200 from its committed state, and every
other worker forwards the query to it, so all answer 200 with the owner's
``served_by``; the answer must equal the final recomputation. Keys that fail are
asked once more after a pause, so a commit landing between two requests is not
mistaken for a wrong answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from tools.chaos.cluster import Cluster, WorkerProc
from tools.chaos.recompute import CheckerExpected, Expected
from tools.chaos.verify import (
    CHECKER,
    SENSORS,
    Answers,
    Check,
    check_rest,
    rest_windows,
    same_windows,
)
from tools.chaos.verify_reference import HASHTAG_COUNTS, POWERUPS

CONCURRENCY = 32
RETRY_AFTER_S = 2.0

# An answer: (HTTP status, value or None, served_by or None).
Reply = tuple[int, Any, str | None]
Ask = Callable[[WorkerProc, str], Awaitable[Reply]]


async def check_answers(
    cluster: Cluster, checker: CheckerExpected, sensors: Expected
) -> list[Check]:
    workers = cluster.alive()
    final = {
        key: {k: agg[k] for k in ("count", "sum", "min", "last_seq")}
        for key, agg in checker.final.items()
    }

    async def agg(worker: WorkerProc, key: str) -> Reply:
        response = await cluster.get(worker, f"/agents/{CHECKER}/state/agg/{key}")
        if response is None:
            return 0, None, None
        if response.status_code != 200:
            return response.status_code, None, None
        body = response.json()
        return 200, body.get("value"), body.get("freshness", {}).get("served_by")

    async def windows(worker: WorkerProc, sensor: str) -> Reply:
        return await _pages(cluster, worker, f"/agents/{SENSORS}/windows/{sensor}")

    want_windows = rest_windows(sensors)
    checks = await _checked(CHECKER, "agg per key", final, workers, agg)
    checks += await _checked(SENSORS, "windows per sensor", want_windows, workers, windows)
    return checks


async def check_reference_answers(
    cluster: Cluster,
    powerups_by_team: dict[str, list[dict[str, Any]]],
    counts_by_tag: dict[str, list[dict[str, Any]]],
) -> list[Check]:
    """The windows of team_powerups per team and of hashtag_counts per hashtag: the
    latest result of each window, oldest first, equal to the recomputation (teams
    that earned nothing have no results to ask about)."""
    workers = cluster.alive()

    async def powerups(worker: WorkerProc, team: str) -> Reply:
        return await _pages(cluster, worker, f"/agents/{POWERUPS}/windows/{team}")

    async def counts(worker: WorkerProc, tag: str) -> Reply:
        return await _pages(cluster, worker, f"/agents/{HASHTAG_COUNTS}/windows/{tag}")

    checks = await _checked(POWERUPS, "power-ups per team", powerups_by_team, workers, powerups)
    checks += await _checked(HASHTAG_COUNTS, "counts per hashtag", counts_by_tag, workers, counts)
    return checks


async def _pages(cluster: Cluster, worker: WorkerProc, path: str) -> Reply:
    """Every window result of one key (``{"key", "windows", "next_from_ms",
    "freshness"}`` pages), following ``next_from_ms``."""
    found: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 1_000}
    while True:
        response = await cluster.get(worker, path, **params)
        if response is None or response.status_code != 200:
            return (0 if response is None else response.status_code), None, None
        body = response.json()
        found += body["windows"]
        if body["next_from_ms"] is None:
            return 200, found, body["freshness"]["served_by"]
        params["from_ms"] = body["next_from_ms"]


async def _checked(
    agent: str, what: str, want: dict[str, Any], workers: Sequence[WorkerProc], ask: Ask
) -> list[Check]:
    same = same_windows if agent == SENSORS else _equal
    answers = await _ask_all(list(want), workers, ask)
    checks = check_rest(agent, what, want, answers, same)
    if all(c.ok for c in checks):
        return checks
    await asyncio.sleep(RETRY_AFTER_S)
    failing = [k for k in want if not _good(answers[k], want[k], same)]
    answers = {**answers, **(await _ask_all(failing, workers, ask))}
    return check_rest(agent, what, want, answers, same)


def _equal(a: Any, b: Any) -> bool:
    return bool(a == b)


def _good(
    answers: Sequence[tuple[str, int, Any, str | None]], want: Any, same: Callable[..., bool]
) -> bool:
    ok = [value for _, status, value, _ in answers if status == 200]
    owners = {by for _, status, _, by in answers if status == 200}
    return len(ok) == len(answers) and len(owners) == 1 and all(same(v, want) for v in ok)


async def _ask_all(keys: list[str], workers: Sequence[WorkerProc], ask: Ask) -> Answers:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(key: str) -> tuple[str, list[tuple[str, int, Any, str | None]]]:
        async with gate:
            results = [await ask(worker, key) for worker in workers]
        pairs = zip(workers, results, strict=True)
        return key, [(w.name, status, value, by) for w, (status, value, by) in pairs]

    return dict(await asyncio.gather(*(one(k) for k in keys)))
