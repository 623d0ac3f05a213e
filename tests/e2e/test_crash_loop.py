"""A record that kills its process cannot make a partition crash-loop: a team's agent
SIGKILLs its own ingest process when it meets one record (as a segfault in a C
extension or the OOM killer would). The worker's supervisor starts the process
again; it dies on the record a second time; the third start dead-letters the
record unprocessed, with the reason, and every other record is counted exactly
once: none lost, none twice. Real broker, real worker processes."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from eddy.runtime.restarts import DIED_TWICE
from tests.support.kafka import produce, read_all, wait_until
from tests.support.team_apps import Worker, user_app

pytestmark = pytest.mark.e2e

PACKAGE = "crashy"
APP = """\
import os
import signal

from pydantic import BaseModel

from eddy import App, Context, Topic, ValueState


class Event(BaseModel):
    key: str
    seq: int
    poison: bool = False


app = App("crashy")
events = Topic("events", Event, key="key")
counted = Topic("counted")
COUNT = ValueState("count", int)


def count(event: Event, ctx: Context) -> None:
    if event.poison:
        os.kill(os.getpid(), signal.SIGKILL)  # what a segfault in native code does
    state = ctx.state(COUNT)
    n = (state.get() or 0) + 1
    state.set(n)
    ctx.output({"key": ctx.key, "seq": event.seq, "count": n})


app.stream(events, name="counting").process(count, states=[COUNT]).to(counted)
"""
KEYS = [f"k{i}" for i in range(12)]
PER_KEY = 100  # events per key, half before the poison record and half after


def events(first: int, last: int) -> list[tuple[bytes, bytes]]:
    return [
        (key.encode(), orjson.dumps({"key": key, "seq": seq}))
        for seq in range(first, last)
        for key in KEYS
    ]


@pytest.mark.timeout(300)
async def test_a_record_that_kills_its_process_twice_is_dead_lettered_unprocessed(
    tmp_path: Path,
) -> None:
    root, env, settings = await user_app(tmp_path, PACKAGE, APP)
    worker = Worker(root, env, tmp_path / "worker.log", PACKAGE)
    try:
        await wait_until(worker.ready, timeout_s=120)
        await produce(settings, settings.topic("events"), events(0, PER_KEY // 2))
        poison = (b"k5", orjson.dumps({"key": "k5", "seq": -1, "poison": True}))
        sent_at = time.monotonic()
        await produce(settings, settings.topic("events"), [poison])
        await produce(settings, settings.topic("events"), events(PER_KEY // 2, PER_KEY))

        dead = await read_all(settings, settings.dead_letters, min_records=1, timeout_s=120)
        cycle_s = time.monotonic() - sent_at
        outputs = await read_all(
            settings, settings.topic("counted"), min_records=len(KEYS) * PER_KEY, timeout_s=120
        )
        assert worker.process.poll() is None, "the worker exited"
        await wait_until(worker.ready, timeout_s=60)
        log = worker.log()
    finally:
        code = worker.stop()
    assert code == 0, worker.log()[-3_000:]

    # Dead-lettered once, unprocessed (its original bytes), with the reason.
    assert [(r.key, r.value) for r in dead] == [poison]
    headers = {name: raw.decode() for name, raw in dead[0].headers}
    assert headers["eddy.reason"] == DIED_TWICE
    assert headers["eddy.source.topic"] == settings.topic("events")
    # Killed exactly twice: the third start did not process it.
    assert log.count("was killed by signal 9 (SIGKILL)") == 2, log[-3_000:]

    # Every other record counted exactly once, in order, across both kills.
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for record in outputs:
        value: dict[str, Any] = orjson.loads(record.value)
        by_key[value["key"]].append((value["seq"], value["count"]))
    lost = sum(PER_KEY - len({seq for seq, _ in by_key[key]}) for key in KEYS)
    duplicated = len(outputs) - sum(len({seq for seq, _ in by_key[key]}) for key in KEYS)
    assert (lost, duplicated) == (0, 0)
    for key in KEYS:
        assert by_key[key] == [(seq, seq + 1) for seq in range(PER_KEY)], key
    print(f"\ndeath, death, dead letter: {cycle_s:.1f} s from the poison record's send")
    assert cycle_s < 60, f"the cycle took {cycle_s:.1f} s"
