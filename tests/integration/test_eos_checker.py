"""The exactly-once checker pipeline on the real broker, without faults."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest

from eddy.settings import Settings
from eddy.worker import Worker
from tests.support.kafka import produce, read_all, unique_settings, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return unique_settings(tmp_path, agents=("eos_checker",))


async def test_echo_agg_and_alerts_follow_the_input(settings: Settings, worker: Worker) -> None:
    names = {n: settings.topic(f"eos-checker-{n}") for n in ("input", "echo", "agg", "alerts")}
    rows = []
    for key in ("k1", "k2"):
        for seq, amount in enumerate([5, -3, 7]):
            rows.append({"id": len(rows), "key": key, "seq": seq, "amount": amount})
    rows.append({"id": 99, "key": "k1", "seq": 7, "amount": 1})  # a gap: 2 -> 7
    records = [(r["key"].encode(), orjson.dumps(r)) for r in rows]
    await produce(settings, names["input"], [*records, (b"k1", b"not json")])

    echo = await read_all(settings, names["echo"], min_records=len(rows))
    assert sorted(orjson.loads(r.value)["id"] for r in echo) == sorted(r["id"] for r in rows)
    aggs = [orjson.loads(r.value) for r in await read_all(settings, names["agg"], min_records=7)]
    k1 = [a for a in aggs if a["key"] == "k1"]
    assert [(a["count"], a["sum"], a["min"]) for a in k1] == [
        (1, 5, 5),
        (2, 2, -3),
        (3, 9, -3),
        (4, 10, -3),
    ]
    alerts = [
        orjson.loads(r.value) for r in await read_all(settings, names["alerts"], min_records=1)
    ]
    assert alerts == [{"key": "k1", "seq": 7, "last_seq": 2}]
    dead = await read_all(settings, settings.dead_letters, min_records=1)
    assert [r.value for r in dead] == [b"not json"]

    url = f"http://127.0.0.1:{worker.api_port}/agents/eos_checker/state/agg/k2"

    async def committed() -> bool:
        async with httpx.AsyncClient() as client:
            response = await client.get(url)
        return response.status_code == 200 and response.json()["value"]["count"] == 3

    await wait_until(committed)
    async with httpx.AsyncClient() as client:
        body = (await client.get(url)).json()
        missing = await client.get(url.replace("/k2", "/nobody"))
    assert body["value"] == {"count": 3, "sum": 9, "min": -3, "last_seq": 2}
    assert missing.status_code == 404
