"""``python -m service savepoint ...`` and ``python -m service stop``."""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import httpx
import orjson

from service.errors import EddyError
from service.pipeline.base import Pipeline
from service.savepoint import catalog
from service.savepoint.restore import RestoreReport, restore
from service.settings import Settings
from service.snapshot.cli import worker_url


def run_savepoint(args: argparse.Namespace) -> int:
    from service.app.loader import load_app_and_settings

    app, settings = load_app_and_settings(getattr(args, "app", None))
    if args.action == "create":
        answer = _post(args.url or worker_url(settings), "/savepoints", {}, settings)
        if not answer["complete"]:
            print(
                f"savepoint {answer['snapshot_id']} is incomplete (not published): no worker "
                f"exported {', '.join(answer['missing'])}; retry once the app is rebalanced"
            )
            return 1
        print(f"savepoint {answer['snapshot_id']}: {answer['rows']} rows at {answer['location']}")
        return 0
    if args.action == "list":
        return _list(settings, as_json=args.json)
    if args.action == "show":
        root, manifest = catalog.locate(settings, args.id)
        summary = catalog.summary(root, manifest)
        print(_json(summary) if args.json else _describe(summary))
        return 0
    if args.action == "dispose":
        print(f"disposed of savepoint {args.id} at {catalog.dispose(settings, args.id)}")
        return 0
    stages = app.build(settings).stages
    report = restore_from(
        settings, args.id, allow=args.allow_non_restored_state, once=False, pipelines=stages
    )
    print(describe_report(report))
    return 0


def run_stop(args: argparse.Namespace) -> int:
    from service.app.loader import load_app_and_settings

    _, settings = load_app_and_settings(getattr(args, "app", None))
    answer = _post(
        args.url or worker_url(settings), "/stop", {"savepoint": args.savepoint}, settings
    )
    taken = answer.get("savepoint")
    if taken is not None:
        print(f"savepoint {taken['snapshot_id']}: {taken['rows']} rows at {taken['location']}")
    stopped = [w.get("worker_id") or w.get("worker") for w in answer["workers"]]
    print(f"stopping {len(stopped)} worker(s): {', '.join(str(w) for w in stopped)}")
    return 0


def restore_from(
    settings: Settings,
    reference: str,
    *,
    allow: bool,
    once: bool,
    pipelines: list[Pipeline],
) -> RestoreReport:
    """Restore the app's stages from savepoint ``reference`` (blocking)."""
    root, manifest = catalog.locate(settings, reference)
    return asyncio.run(
        restore(settings, pipelines, root, manifest, allow_non_restored_state=allow, once=once)
    )


def describe_report(report: RestoreReport) -> str:
    lines = [f"restored from savepoint {report.savepoint_id}:"]
    for p in report.pipelines:
        if p.skipped:
            lines.append(f"  {p.name}: already restored from it; left as it is")
            continue
        moved = "" if p.partitions == p.saved_partitions else f" (saved with {p.saved_partitions})"
        lines.append(
            f"  {p.name}: {p.rows} rows into {p.partitions} partitions{moved}, "
            f"{p.migrated} migrated, {p.tombstones} later keys deleted"
        )
    if report.dropped:
        lines.append(f"  not restored (--allow-non-restored-state): {', '.join(report.dropped)}")
    return "\n".join(lines)


def _list(settings: Settings, *, as_json: bool) -> int:
    savepoints = catalog.listing(settings)
    if as_json:
        print(_json(savepoints))
        return 0
    if not savepoints:
        print(f"no savepoint of {settings.app_id} under {settings.savepoint_root}")
    for s in savepoints:
        print(
            f"{s['savepoint_id']}  {_utc(s['created_ms'])}  {s['rows']:>10} rows  {s['location']}"
        )
    return 0


def _describe(summary: dict[str, Any]) -> str:
    lines = [
        f"savepoint {summary['savepoint_id']} of {summary['app_id']}, "
        f"{_utc(summary['created_ms'])}, {summary['rows']} rows at {summary['location']}"
    ]
    for name, p in summary["pipelines"].items():
        lines.append(f"  {name}: {p['partitions']} partitions, {p['rows']} rows")
        for table, t in sorted(p["tables"].items()):
            lines.append(f"    {table}: {t['rows']} rows, schema version {t['version']}")
        for partition, offsets in sorted(p["committed_offsets"].items(), key=lambda i: int(i[0])):
            lines.append(f"    partition {partition}: offsets {offsets}")
    return "\n".join(lines)


def _utc(time_ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(time_ms / 1000))


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def _post(url: str, path: str, body: dict[str, Any], settings: Settings) -> dict[str, Any]:
    headers = {}
    if settings.api_token is not None:
        headers["Authorization"] = f"Bearer {settings.api_token.get_secret_value()}"
    try:
        response = httpx.post(
            f"{url}{path}", json=body, headers=headers, timeout=settings.snapshot_timeout_ms / 1000
        )
    except httpx.HTTPError as exc:
        raise EddyError(
            f"no worker answered at {url} ({exc}): start one (make run) or pass --url"
        ) from None
    if response.status_code != 200:
        detail = response.json().get("detail", response.text) if response.content else ""
        raise EddyError(f"the worker at {url} refused ({response.status_code}): {detail}")
    answer: dict[str, Any] = response.json()
    return answer
