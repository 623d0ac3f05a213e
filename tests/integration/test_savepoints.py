"""Savepoints over REST and state evolution across a resume, against the real broker
and RocksDB: a v1 pipeline runs and is savepointed; v2 code adds a state, drops
one (refused, then accepted with the flag) and changes a value schema with a
migration; the resumed pipeline goes on from the migrated values."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from eddy import App, Context, StateDescriptor, Topic, ValueState
from eddy.client import WorkerClient
from eddy.examples.eos_checker import CheckerRecord
from eddy.savepoint import catalog
from eddy.savepoint.plan import SavepointIncompatibleError
from eddy.savepoint.restore import restore
from eddy.settings import Settings
from eddy.topics import TopicSpec, ensure_topics
from eddy.worker import Worker
from tests.support.kafka import produce, read_all, unique_settings, wait_until

pytestmark = pytest.mark.integration
KEYS = 6


COUNT_V1 = ValueState("count", int)
LAST = ValueState("last", int)


def count_v1(value: CheckerRecord, ctx: Context) -> None:
    """Counts records per key as a bare number, and keeps the last amount."""
    count = ctx.state(COUNT_V1)
    count.set((count.get() or 0) + 1)
    ctx.state(LAST).set(value.amount)
    ctx.output({"key": ctx.key, "seq": value.seq, "count": count.get()})


COUNT_V2 = ValueState("count", dict[str, int], version=2, migrate={1: lambda n: {"n": n}})
SINCE = ValueState("seen_since_upgrade", int)


def count_v2(value: CheckerRecord, ctx: Context) -> None:
    """Counts in ``{"n": ...}`` (version 2), no longer keeps ``last``, and adds
    ``seen_since_upgrade``, which starts empty."""
    count = ctx.state(COUNT_V2)
    n = (count.get() or {"n": 0})["n"] + 1
    count.set({"n": n})
    since = ctx.state(SINCE)
    since.set((since.get() or 0) + 1)
    ctx.output({"key": ctx.key, "seq": value.seq, "count": n, "since": since.get()})


def pipeline(
    settings: Settings, function: Any, states: Sequence[StateDescriptor[Any]]
) -> list[Any]:
    """The ``evolving`` agent, as a worker of this version of the code runs it."""
    app = App("evolving")
    source = Topic("evolving-in", CheckerRecord, key="key")
    app.stream(source, name="evolving").process(function, states=states).to(Topic("evolving-out"))
    return app.build(settings, ["evolving"]).stages


def _input(settings: Settings) -> str:
    return settings.topic("evolving-in")


def rows(seqs: range) -> list[tuple[bytes, bytes]]:
    return [
        (
            f"k{k}".encode(),
            orjson.dumps({"id": s * KEYS + k, "key": f"k{k}", "seq": s, "amount": s}),
        )
        for s in seqs
        for k in range(KEYS)
    ]


async def _run_until(worker: Worker, records: int) -> None:
    await worker.start()
    await wait_until(
        lambda: worker.status()["stages"]["evolving"]["records_in"] >= records, timeout_s=90
    )


async def test_savepoints_over_rest_and_state_evolution_on_resume(tmp_path: Path) -> None:
    settings = unique_settings(tmp_path, agents=None)
    await ensure_topics(settings, [TopicSpec(_input(settings), 2)])
    await produce(settings, _input(settings), rows(range(5)))

    v1 = pipeline(settings, count_v1, [COUNT_V1, LAST])
    worker = Worker(settings, v1)
    try:
        await _run_until(worker, 5 * KEYS)
        base = f"http://127.0.0.1:{worker.api_port}"
        async with httpx.AsyncClient(base_url=base) as client:
            started = await client.post("/savepoints")
            assert started.status_code == 202
            assert started.headers["location"] == f"/operations/{started.json()['operation_id']}"
            taken = await asyncio.to_thread(WorkerClient(base, settings).run, "/savepoints")
            assert taken["complete"], taken
            savepoint_id = taken["id"]
            listed = (await client.get("/savepoints")).json()
            assert len(listed["items"]) == 2  # the one started above, and this one
            assert savepoint_id in [s["id"] for s in listed["items"]]
            one = (await client.get("/savepoints", params={"limit": 1})).json()
            assert one["next_after"] == one["items"][0]["id"]
            shown = (await client.get(f"/savepoints/{savepoint_id}")).json()
            tables = shown["stages"]["evolving"]["tables"]
            assert tables["state.count"] == {"rows": KEYS, "version": 1}
            assert tables["state.last"] == {"rows": KEYS, "version": 1}
            bad = await client.get("/savepoints/yesterday")
            assert bad.status_code == 422
            assert bad.json()["detail"]
            missing = await client.get("/savepoints/20200101T000000000Z")
            assert missing.status_code == 404
            assert "savepoint" in missing.json()["detail"]
            # The other one, disposed of: only the operator deletes savepoints.
            (other,) = [s["id"] for s in listed["items"] if s["id"] != savepoint_id]
            assert (await client.delete(f"/savepoints/{other}")).status_code == 200
            assert (await client.get(f"/savepoints/{other}")).status_code == 404
    finally:
        await worker.stop()

    root, manifest = catalog.locate(settings, savepoint_id)
    v2 = pipeline(settings, count_v2, [COUNT_V2, SINCE])
    with pytest.raises(SavepointIncompatibleError, match=r"evolving/state\.last"):
        await restore(settings, v2, root, manifest)
    no_migration = ValueState("count", dict[str, int], version=2)
    v2_without_migration = pipeline(settings, count_v2, [no_migration, SINCE])
    with pytest.raises(SavepointIncompatibleError, match="no migration from 1"):
        await restore(settings, v2_without_migration, root, manifest, allow_non_restored_state=True)

    report = await restore(settings, v2, root, manifest, allow_non_restored_state=True)
    assert report.dropped == ["evolving/state.last"]
    (restored,) = report.pipelines
    assert restored.migrated == KEYS

    await produce(settings, _input(settings), rows(range(5, 8)))
    resumed = Worker(settings, v2)
    try:
        await _run_until(resumed, 3 * KEYS)
        out = await read_all(settings, settings.topic("evolving-out"), min_records=8 * KEYS)
        # The v2 worker's own state: the dropped table is gone, the new one is there.
        store = resumed.runtimes["evolving"].stores
        tables = {name for p in range(2) if (s := store.get(p)) for name in s.table_names()}
    finally:
        await resumed.stop()
    after = [orjson.loads(r.value) for r in out if orjson.loads(r.value)["seq"] >= 5]
    assert len(after) == 3 * KEYS
    for record in after:
        # Counting went on from the migrated counts; the new state started empty.
        assert record["count"] == record["seq"] + 1
        assert record["since"] == record["seq"] - 4
    assert "state.last" not in tables
    assert {"state.count", "state.seen_since_upgrade"} <= tables
