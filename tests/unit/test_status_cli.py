"""``python -m eddy status`` without a worker: the table an operator reads, the
JSON, and one-line errors (exit 2) when no worker answers."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest
from rich.console import Console

from eddy.cli import main
from eddy.status import age, render, utc_ms

NOW_MS = 1_795_682_551_123  # 2026-11-26 08:42:31.123 UTC


def jobs_answer() -> dict[str, Any]:
    def row(partition: int, state: str, **values: Any) -> dict[str, Any]:
        base = {
            "partition": partition,
            "owner": {"worker_id": "worker-a", "endpoint": "http://a:8000"},
            "state": state,
            "error": None,
            "committed_offsets": {},
            "end_offsets": {},
            "lag": None,
            "watermark_ms": None,
            "last_commit_ms": None,
            "latency_ms": None,
            "records_in": None,
            "records_out": None,
        }
        return {**base, **values}

    rows = [
        row(0, "running", lag=0, watermark_ms=NOW_MS - 1_000, last_commit_ms=NOW_MS - 300)
        | {"latency_ms": 142.0},
        row(1, "restoring"),
        row(2, "unreachable", owner={"worker_id": None, "endpoint": "http://b:8000"})
        | {"error": "the worker at http://b:8000 does not answer: ConnectError()"},
        row(3, "unassigned", owner=None, error="no owner yet (rebalancing)"),
    ]
    return {
        "app_id": "eddy",
        "served_by": "worker-a",
        "now_ms": NOW_MS,
        "complete": False,
        "workers": [
            {
                "worker_id": "worker-a",
                "endpoint": "http://a:8000",
                "reachable": True,
                "error": None,
            },
            {
                "worker_id": None,
                "endpoint": "http://b:8000",
                "reachable": False,
                "error": "does not answer: ConnectError()",
            },
        ],
        "stages": [
            {
                "stage": "hashtag_counts.repartition",
                "agent": "hashtag_counts",
                "inputs": ["r"],
                "partition_count": 4,
                "partitions": rows,
            }
        ],
        "last_savepoint": None,
        "last_snapshot": {
            "id": "20261126T080000000Z",
            "created_ms": NOW_MS - 2_551_123,
            "location": "/data/snapshots/eddy/20261126T080000000Z",
        },
        "errors": [],
    }


def rendered(answer: dict[str, Any]) -> list[str]:
    out = io.StringIO()
    render(answer, Console(file=out, width=200, highlight=False))
    return out.getvalue().splitlines()


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("│").split("│")]


def test_one_row_per_partition_with_its_agent_stage_owner_state_lag_and_commit() -> None:
    lines = rendered(jobs_answer())
    rows = {int(c[2]): c for line in lines if len(c := cells(line)) == 9 and c[2].isdigit()}
    assert sorted(rows) == [0, 1, 2, 3]
    assert rows[0] == [
        "hashtag_counts",
        "hashtag_counts.repartition",
        "0",
        "worker-a",
        "running",
        "0",
        "2026-11-26 08:42:30.123",
        "0.3 s ago",
        "142 ms",
    ]
    assert rows[1][4:6] == ["restoring", "-"]
    assert rows[1][7] == "never"
    assert rows[2][3:5] == ["http://b:8000", "unreachable"]  # owner known, not its id
    assert rows[3][3:5] == ["-", "unassigned"]
    assert "1 of 4 partitions running" in lines[0]


def test_savepoint_snapshot_and_problems_follow_the_table() -> None:
    text = "\n".join(rendered(jobs_answer()))
    assert "last savepoint: none" in text
    assert (
        "last snapshot: 20261126T080000000Z (2026-11-26 08:00:00.000 UTC, 43 min ago) "
        "at /data/snapshots/eddy/20261126T080000000Z"
    ) in text
    assert "unreachable: worker at http://b:8000 does not answer" in text
    assert "hashtag_counts.repartition[3] unassigned: no owner yet (rebalancing)" in text


def test_times_for_humans() -> None:
    assert utc_ms(0) == "1970-01-01 00:00:00.000"
    assert utc_ms(None) == "-"
    assert age(10_000, 9_000) == "1.0 s ago"
    assert age(10_000, None) == "never"
    assert age(7_200_000, 0) == "2.0 h ago"
    assert age(0, 5_000) == "0.0 s ago"  # a commit "in the future": clocks disagree


def fake_get(answer: httpx.Response | Exception) -> Any:
    def get(url: str, **_: Any) -> httpx.Response:
        if isinstance(answer, Exception):
            raise answer
        answer.request = httpx.Request("GET", url)
        return answer

    return get


def test_json_prints_the_answer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(httpx, "get", fake_get(httpx.Response(200, json=jobs_answer())))
    assert main(["status", "--json", "--url", "http://a:8000"]) == 0
    assert json.loads(capsys.readouterr().out) == jobs_answer()


def test_no_worker_is_one_line_naming_the_url_and_the_settings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(httpx, "get", fake_get(httpx.ConnectError("Connection refused")))
    assert main(["status", "--url", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "http://127.0.0.1:9" in err
    assert "EDDY_API_PORT" in err
    assert "Traceback" not in err


def test_a_refusing_worker_says_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    denied = httpx.Response(401, json={"detail": "missing or wrong bearer token"})
    monkeypatch.setattr(httpx, "get", fake_get(denied))
    assert main(["status", "--url", "http://a:8000"]) == 2
    err = capsys.readouterr().err
    assert "answered 401: missing or wrong bearer token" in err
    assert "EDDY_API_TOKEN" in err
