"""``eddy snapshot|savepoint create|list|show|dispose``: the same verbs for both
(a savepoint also has ``restore``; see service/savepoint/cli.py)."""

from __future__ import annotations

import argparse
import time
from typing import Any

import orjson

from eddy.client import WorkerClient, worker_url
from eddy.settings import Settings
from eddy.snapshot import catalog
from eddy.snapshot.catalog import Kind


def run_kind(kind: Kind, args: argparse.Namespace, settings: Settings) -> int:
    """One of the shared verbs; 1 when a snapshot came out incomplete."""
    if args.action == "create":
        taken = WorkerClient(args.url or worker_url(settings), settings).run(f"/{kind}s")
        if args.json:
            print(as_json(taken))
        return report_taken(kind, taken)
    if args.action == "list":
        found = catalog.listing(settings, kind)
        print(as_json(found) if args.json else describe_listing(kind, settings, found))
        return 0
    if args.action == "show":
        root, manifest = catalog.locate(settings, kind, args.id)
        summary = catalog.summary(root, manifest)
        print(as_json(summary) if args.json else describe(kind, summary))
        return 0
    location = catalog.dispose(settings, kind, args.id)
    if args.json:
        print(as_json({"id": args.id, "location": location}))
    else:
        print(f"disposed of {kind} {args.id} at {location}")
    return 0


def report_taken(kind: str, taken: dict[str, Any]) -> int:
    if not taken["complete"]:
        print(
            f"{kind} {taken['id']} is incomplete (not published): no worker exported "
            f"{', '.join(taken['missing'])}; retry once the app is rebalanced"
        )
        return 1
    print(f"{kind} {taken['id']}: {taken['rows']} rows at {taken['location']}")
    return 0


def describe_listing(kind: str, settings: Settings, found: list[dict[str, Any]]) -> str:
    if not found:
        root = catalog.open_root(settings, kind)  # type: ignore[arg-type]
        return f"no complete {kind} of {settings.app_id} under {root.shown}"
    return "\n".join(
        f"{s['id']}  {utc(s['created_ms'])}  BROKEN: {s['broken']}  {s['location']}"
        if s["broken"]
        else f"{s['id']}  {utc(s['created_ms'])}  {s['rows']:>10} rows  {s['location']}"
        for s in found
    )


def describe(kind: str, summary: dict[str, Any]) -> str:
    lines = [
        f"{kind} {summary['id']} of {summary['app_id']}, "
        f"{utc(summary['created_ms'])}, {summary['rows']} rows at {summary['location']}"
    ]
    for name, p in summary["stages"].items():
        lines.append(f"  {name}: {p['partitions']} partitions, {p['rows']} rows")
        for table, t in sorted(p["tables"].items()):
            lines.append(f"    {table}: {t['rows']} rows, schema version {t['version']}")
        for partition, offsets in sorted(p["committed_offsets"].items(), key=lambda i: int(i[0])):
            lines.append(f"    partition {partition}: offsets {offsets}")
    return "\n".join(lines)


def utc(time_ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(time_ms / 1000))


def as_json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def run_cli(args: argparse.Namespace) -> int:
    from eddy.app.loader import load_app_and_settings

    _, settings = load_app_and_settings(getattr(args, "app", None))
    return run_kind("snapshot", args, settings)
