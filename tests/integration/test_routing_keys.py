"""Any key reaches the worker that owns it, unchanged: two workers on the real
broker split the partitions, and keys holding ``/``, ``%``, spaces, non-ASCII, or
that are ``.`` or ``..`` (percent-encoded, as httpx and curl send them) are answered by
either worker, the one that does not own the key forwarding to the one that
does; listing keys merges both workers' partitions."""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import quote

import httpx
import orjson
import pytest

from eddy.app.queries import partition_for
from eddy.settings import Settings
from eddy.worker import Worker
from tests.integration.test_routing import BASE_MS, PIPELINE, owned, reading, split_between
from tests.support.kafka import produce, read_all, readings_topic

pytestmark = pytest.mark.integration

KEYS = [".", "..", "a/b", "../x", "100%", "%25", "a b", "é/ü", "x?y#z", "/"]


def path_of(key: str) -> str:
    """As docs/api.md says to: percent-encoded, and ``.``/``..`` as ``%2E``."""
    encoded = quote(key, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


async def curl(url: str) -> bytes:
    """``curl -s url``'s output (in a process: the workers answer in this loop)."""
    process = await asyncio.create_subprocess_exec(
        "curl", "-s", "--fail-with-body", url, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    assert process.returncode == 0, out
    return out


async def test_any_key_is_answered_by_any_worker_from_its_owner(
    settings: Settings, tmp_path: Path
) -> None:
    settings_b = settings.model_copy(
        update={"state_dir": tmp_path / "state-b", "worker_id": f"{settings.worker_id}-b"}
    )
    a, b = Worker(settings), Worker(settings_b)
    await a.start()
    await b.start()
    try:
        await split_between(a, b, settings.partitions)
        owner_of = {
            key: (a if partition_for(key, settings.partitions) in owned(a) else b) for key in KEYS
        }
        assert {w.worker_id for w in owner_of.values()} == {a.worker_id, b.worker_id}
        rows = [reading(key, BASE_MS + 1_000, 20.0) for key in KEYS]
        # One reading an hour later on every partition closes every key's window.
        closers = {partition_for(f"c{n}", settings.partitions): f"c{n}" for n in range(200)}
        rows += [reading(key, BASE_MS + 3_600_000, 0.0) for key in closers.values()]
        await produce(settings, readings_topic(settings), rows)
        await read_all(settings, settings.topic("sensor-averages"), min_records=len(KEYS))

        async with httpx.AsyncClient(timeout=10) as client:
            for key in KEYS:
                for asked in (a, b):  # the owner, and the one that forwards
                    url = f"http://127.0.0.1:{asked.api_port}/sensors/{path_of(key)}/windows"
                    answer = await client.get(url)
                    assert answer.status_code == 200, (key, asked.worker_id, answer.text)
                    body = orjson.loads(answer.content)
                    assert body["key"] == key
                    assert [w["sensor_id"] for w in body["windows"]] == [key]
                    assert body["freshness"]["served_by"] == owner_of[key].worker_id
            # What curl sends, too (it keeps %2E as it is, as httpx does).
            for key in (".", "..", "a/b"):
                not_owner = b if owner_of[key] is a else a
                url = f"http://127.0.0.1:{not_owner.api_port}/sensors/{path_of(key)}/windows"
                body = orjson.loads(await curl(url))
                assert (body["key"], body["freshness"]["served_by"]) == (
                    key,
                    owner_of[key].worker_id,
                )
            listed = await client.get(
                f"http://127.0.0.1:{a.api_port}/agents/{PIPELINE}/keys",
                params={"prefix": "", "limit": 100},
            )
        body = listed.json()
        assert listed.status_code == 200, body
        # Both workers' partitions, in the results table's order: shorter keys first.
        assert body["keys"] == sorted(KEYS, key=lambda k: (len(k.encode()), k.encode()))
        assert body["partitions"] == list(range(settings.partitions))
        assert body["next_after"] is None
    finally:
        await a.stop()
        await b.stop()
