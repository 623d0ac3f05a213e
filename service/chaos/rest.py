"""Queryable state after the drain: every worker asked about every key.

The owner of a key's partition answers 200 from its committed state, every other
worker 503; the answer must equal the final recomputation. Keys that fail are
asked once more after a pause, so a commit landing between two requests is not
mistaken for a wrong answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from service.chaos.cluster import Cluster, WorkerProc
from service.chaos.recompute import CheckerExpected, Expected
from service.chaos.verify import (
    CHECKER,
    SENSORS,
    Answers,
    Check,
    check_rest,
    rest_windows,
    same_windows,
)

CONCURRENCY = 32
RETRY_AFTER_S = 2.0

Ask = Callable[[WorkerProc, str], Awaitable[tuple[int, Any]]]


async def check_answers(
    cluster: Cluster, checker: CheckerExpected, sensors: Expected
) -> list[Check]:
    workers = cluster.alive()
    final = {
        key: {k: agg[k] for k in ("count", "sum", "min", "last_seq")}
        for key, agg in checker.final.items()
    }

    async def agg(worker: WorkerProc, key: str) -> tuple[int, Any]:
        response = await cluster.get(worker, f"/pipelines/eos_checker/state/agg/keys/{key}")
        if response is None:
            return 0, None
        body = response.json()
        return response.status_code, body.get("value") if response.status_code == 200 else None

    async def windows(worker: WorkerProc, sensor: str) -> tuple[int, Any]:
        found: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 1_000}
        while True:
            response = await cluster.get(worker, f"/sensors/{sensor}/windows", **params)
            if response is None or response.status_code != 200:
                return (0 if response is None else response.status_code), None
            body = response.json()
            found += body["windows"]
            if body["next_from_ms"] is None:
                return 200, found
            params["from_ms"] = body["next_from_ms"]

    want_windows = rest_windows(sensors)
    checks = await _checked(CHECKER, "agg per key", final, workers, agg)
    checks += await _checked(SENSORS, "windows per sensor", want_windows, workers, windows)
    return checks


async def _checked(
    pipeline: str, what: str, want: dict[str, Any], workers: Sequence[WorkerProc], ask: Ask
) -> list[Check]:
    same = same_windows if pipeline == SENSORS else _equal
    answers = await _ask_all(list(want), workers, ask)
    checks = check_rest(pipeline, what, want, answers, same)
    if all(c.ok for c in checks):
        return checks
    await asyncio.sleep(RETRY_AFTER_S)
    failing = [k for k in want if not _good(answers[k], want[k], same)]
    answers = {**answers, **(await _ask_all(failing, workers, ask))}
    return check_rest(pipeline, what, want, answers, same)


def _equal(a: Any, b: Any) -> bool:
    return bool(a == b)


def _good(answers: Sequence[tuple[str, int, Any]], want: Any, same: Callable[..., bool]) -> bool:
    ok = [value for _, status, value in answers if status == 200]
    return len(ok) == 1 and bool(same(ok[0], want))


async def _ask_all(keys: list[str], workers: Sequence[WorkerProc], ask: Ask) -> Answers:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(key: str) -> tuple[str, list[tuple[str, int, Any]]]:
        async with gate:
            results = [await ask(worker, key) for worker in workers]
        pairs = zip(workers, results, strict=True)
        return key, [(w.name, status, value) for w, (status, value) in pairs]

    return dict(await asyncio.gather(*(one(k) for k in keys)))
