"""``python -m eddy status``: the operations view of a running app, as a table.

It asks one worker's ``GET /jobs`` (which asks the others), so it works from any
machine that reaches one worker's API, and needs no Kafka client of its own.
Times are shown relative to the worker's clock (``now_ms`` of the answer), so a
skewed laptop clock does not make commits look old.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from eddy.client import worker_url
from eddy.errors import EddyError
from eddy.settings import Settings

# The worker waits up to 5 s for each peer; leave it time to say which one is down.
TIMEOUT_S = 15.0


class WorkerUnreachableError(EddyError):
    """No worker answered at the URL asked. Start one (``make run``), or point
    ``--url`` (or ``EDDY_API_HOST``/``EDDY_API_PORT``) at a running worker."""


class StatusRefusedError(EddyError):
    """The worker answered with an error: the message has its status and detail
    (401: set ``EDDY_API_TOKEN`` to the workers' token)."""


def fetch_jobs(url: str, settings: Settings) -> dict[str, Any]:
    """``GET /jobs`` of the worker at ``url``, with the API token if one is set."""
    token = settings.api_token
    headers = {"Authorization": f"Bearer {token.get_secret_value()}"} if token else {}
    try:
        response = httpx.get(f"{url}/jobs", headers=headers, timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise WorkerUnreachableError(
            f"no worker answered at {url} ({exc or type(exc).__name__}): start one "
            "(make run), or pass --url or set EDDY_API_HOST/EDDY_API_PORT"
        ) from None
    if response.status_code != 200:
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        hint = ": set EDDY_API_TOKEN to the workers' token" if response.status_code == 401 else ""
        raise StatusRefusedError(
            f"the worker at {url} answered {response.status_code}: {detail}{hint}"
        )
    answer: dict[str, Any] = response.json()
    return answer


def utc_ms(time_ms: int | None) -> str:
    """Epoch ms as a UTC time with milliseconds, or '-'."""
    if time_ms is None:
        return "-"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time_ms // 1000))
    return f"{stamp}.{time_ms % 1000:03d}"


def age(now_ms: int, then_ms: int | None) -> str:
    """How long before ``now_ms`` ``then_ms`` was, for a human: '1.2 s ago'."""
    if then_ms is None:
        return "never"
    seconds = max(0, now_ms - then_ms) / 1000
    if seconds < 60:
        return f"{seconds:.1f} s ago"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 86_400:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86_400:.1f} d ago"


def _latency(latency_ms: float | None) -> str:
    if latency_ms is None:
        return "-"
    return f"{latency_ms:.0f} ms" if latency_ms < 1000 else f"{latency_ms / 1000:.1f} s"


def _owner(owner: dict[str, Any] | None) -> str:
    if owner is None:
        return "-"
    return str(owner.get("worker_id") or owner.get("endpoint") or "-")


def jobs_table(jobs: dict[str, Any]) -> Table:
    """One row per partition of each stage, with the stage's agent."""
    now_ms = jobs["now_ms"]
    rows = [(s, r) for s in jobs["stages"] for r in s["partitions"]]
    running = sum(1 for _, r in rows if r["state"] == "running")
    table = Table(
        title=f"{jobs['app_id']}: {running} of {len(rows)} partitions running "
        f"(asked {jobs['served_by']})",
        title_justify="left",
    )
    for column in ("agent", "stage", "partition", "owner", "state", "lag", "watermark (UTC)"):
        table.add_column(column, justify="right" if column in ("partition", "lag") else "left")
    table.add_column("last commit")
    table.add_column("latency", justify="right")
    for stage, row in rows:
        table.add_row(
            stage["agent"],
            stage["stage"],
            str(row["partition"]),
            _owner(row["owner"]),
            row["state"],
            "-" if row["lag"] is None else str(row["lag"]),
            utc_ms(row["watermark_ms"]),
            age(now_ms, row["last_commit_ms"]),
            _latency(row["latency_ms"]),
        )
    return table


def footer(jobs: dict[str, Any]) -> list[str]:
    """Savepoint, snapshot, and what is wrong, one line each."""
    lines = []
    for kind in ("savepoint", "snapshot"):
        cut = jobs.get(f"last_{kind}")
        if cut is None:
            lines.append(f"last {kind}: none")
        else:
            when = f"{utc_ms(cut['created_ms'])} UTC, {age(jobs['now_ms'], cut['created_ms'])}"
            lines.append(f"last {kind}: {cut['id']} ({when}) at {cut['location']}")
    for worker in jobs["workers"]:
        if not worker["reachable"]:
            lines.append(f"unreachable: worker at {worker['endpoint']} {worker['error']}")
    problems = {
        f"{stage['stage']}[{row['partition']}] {row['state']}: {row['error']}"
        for stage in jobs["stages"]
        for row in stage["partitions"]
        if row["state"] == "unassigned" and row["error"]
    }
    lines += sorted(problems)
    lines += [f"error: {error}" for error in jobs.get("errors", [])]
    return lines


def render(jobs: dict[str, Any], console: Console) -> None:
    console.print(jobs_table(jobs))
    for line in footer(jobs):
        console.print(line, markup=False)


def run_cli(args: argparse.Namespace) -> int:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request at INFO
    from eddy.app.loader import load_app_and_settings

    _, settings = load_app_and_settings(getattr(args, "app", None))
    jobs = fetch_jobs(args.url or worker_url(settings), settings)
    if args.json:
        print(json.dumps(jobs, indent=2))
        return 0
    # Piped output has no terminal width; rich would squeeze the table into 80 columns.
    render(jobs, Console(highlight=False, width=None if sys.stdout.isatty() else 200))
    return 0
