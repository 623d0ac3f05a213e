"""Savepoints over REST and state evolution across a resume, against the real broker
and RocksDB: a v1 pipeline runs and is savepointed; v2 code adds a state, drops
one (refused, then accepted with the flag) and changes a value schema with a
migration; the resumed pipeline goes on from the migrated values."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from agents.eos_checker import CheckerRecord
from service.eventtime.process import Context
from service.pipeline.keyed import Input, KeyedProcess
from service.savepoint import catalog
from service.savepoint.plan import SavepointIncompatibleError
from service.savepoint.restore import restore
from service.settings import Settings
from service.topics import TopicSpec, ensure_topics
from service.worker import Worker
from tables.schema import StateSchema, json_schema
from tests.support.kafka import produce, read_all, unique_settings, wait_until

pytestmark = pytest.mark.integration
KEYS = 6


class CountV1:
    """Counts records per key as a bare number, and keeps the last amount."""

    def process_element(self, value: dict[str, Any], ctx: Context) -> None:
        count = ctx.state.value("count")
        count.set((count.get() or 0) + 1)
        ctx.state.value("last").set(value["amount"])
        ctx.output({"key": ctx.key, "seq": value["seq"], "count": count.get()})


class CountV2:
    """Counts in ``{"n": ...}`` (schema v2), no longer keeps ``last``, and adds
    ``seen_since_upgrade``, which starts empty."""

    def process_element(self, value: dict[str, Any], ctx: Context) -> None:
        count = ctx.state.value("count")
        n = (count.get() or {"n": 0})["n"] + 1
        count.set({"n": n})
        since = ctx.state.value("seen_since_upgrade")
        since.set((since.get() or 0) + 1)
        ctx.output({"key": ctx.key, "seq": value["seq"], "count": n, "since": since.get()})


V2_STATES: Mapping[str, StateSchema] = {
    "count": json_schema(2, {1: lambda n: {"n": n}}),
    "seen_since_upgrade": StateSchema(),
}


def pipeline(settings: Settings, function: Any, states: Mapping[str, StateSchema]) -> KeyedProcess:
    return KeyedProcess(
        name="evolving",
        inputs=[Input(_input(settings), CheckerRecord, key=lambda r: r.key)],
        function=function,
        outputs={"main": settings.topic("evolving-out")},
        states=states,
    )


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
        lambda: worker.status()["pipelines"]["evolving"]["records_in"] >= records, timeout_s=90
    )


async def test_savepoints_over_rest_and_state_evolution_on_resume(tmp_path: Path) -> None:
    settings = unique_settings(tmp_path)
    await ensure_topics(settings, [TopicSpec(_input(settings), 2)])
    await produce(settings, _input(settings), rows(range(5)))

    v1 = pipeline(settings, CountV1(), {"count": StateSchema(), "last": StateSchema()})
    worker = Worker(settings, [v1])
    try:
        await _run_until(worker, 5 * KEYS)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.api_port}") as client:
            taken = (await client.post("/savepoints", json={})).json()
            assert taken["complete"], taken
            savepoint_id = taken["snapshot_id"]
            listed = (await client.get("/savepoints")).json()
            assert [s["savepoint_id"] for s in listed] == [savepoint_id]
            shown = (await client.get(f"/savepoints/{savepoint_id}")).json()
            tables = shown["pipelines"]["evolving"]["tables"]
            assert tables["state.count"] == {"rows": KEYS, "version": 1}
            assert tables["state.last"] == {"rows": KEYS, "version": 1}
            bad = await client.get("/savepoints/yesterday")
            assert bad.status_code == 422
            assert bad.json()["detail"]
            missing = await client.get("/savepoints/20200101T000000000Z")
            assert missing.status_code == 404
            assert "savepoint" in missing.json()["detail"]
            # A second one, disposed of: only the operator deletes savepoints.
            other = (await client.post("/savepoints", json={})).json()["snapshot_id"]
            assert (await client.delete(f"/savepoints/{other}")).status_code == 200
            assert (await client.get(f"/savepoints/{other}")).status_code == 404
    finally:
        await worker.stop()

    root, manifest = catalog.locate(settings, savepoint_id)
    v2 = pipeline(settings, CountV2(), V2_STATES)
    with pytest.raises(SavepointIncompatibleError, match=r"evolving/state\.last"):
        await restore(settings, [v2], root, manifest)
    v2_without_migration = pipeline(settings, CountV2(), {"count": StateSchema(version=2)})
    with pytest.raises(SavepointIncompatibleError, match="no migration from 1"):
        await restore(
            settings, [v2_without_migration], root, manifest, allow_non_restored_state=True
        )

    report = await restore(settings, [v2], root, manifest, allow_non_restored_state=True)
    assert report.dropped == ["evolving/state.last"]
    (restored,) = report.pipelines
    assert restored.migrated == KEYS

    await produce(settings, _input(settings), rows(range(5, 8)))
    resumed = Worker(settings, [v2])
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
