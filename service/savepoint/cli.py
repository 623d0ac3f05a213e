"""``python -m eddy savepoint ...`` and ``python -m eddy stop``."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping

from eddy.client import WorkerClient, worker_url
from eddy.pipeline.base import Pipeline
from eddy.savepoint import catalog
from eddy.savepoint.restore import RestoreReport, restore
from eddy.settings import Settings
from eddy.snapshot.cli import run_kind


def run_savepoint(args: argparse.Namespace) -> int:
    from eddy.app.loader import load_app_and_settings

    app, settings = load_app_and_settings(getattr(args, "app", None))
    if args.action != "restore":
        return run_kind("savepoint", args, settings)
    built = app.build(settings)
    report = restore_from(
        settings,
        args.id,
        allow=args.allow_non_restored_state,
        once=False,
        pipelines=built.stages,
        group_ids={s.name: built.group_id_of(s.name) for s in built.stages},
    )
    print(describe_report(report))
    return 0


def run_stop(args: argparse.Namespace) -> int:
    from eddy.app.loader import load_app_and_settings

    _, settings = load_app_and_settings(getattr(args, "app", None))
    client = WorkerClient(args.url or worker_url(settings), settings)
    answer = client.run("/stop", {"savepoint": args.savepoint}, gone_is_done=True)
    taken = answer.get("savepoint")
    if taken is not None:
        print(f"savepoint {taken['id']}: {taken['rows']} rows at {taken['location']}")
    workers = answer.get("workers")
    if workers is None:
        print("the app is stopping (its workers stopped answering)")
        return 0
    stopped = [w.get("worker_id") or w.get("worker") for w in workers]
    print(f"stopping {len(stopped)} worker(s): {', '.join(str(w) for w in stopped)}")
    return 0


def restore_from(
    settings: Settings,
    reference: str,
    *,
    allow: bool,
    once: bool,
    pipelines: list[Pipeline],
    group_ids: Mapping[str, str] | None = None,
) -> RestoreReport:
    """Restore the app's stages from savepoint ``reference`` (blocking)."""
    root, manifest = catalog.locate(settings, reference)
    return asyncio.run(
        restore(
            settings,
            pipelines,
            root,
            manifest,
            allow_non_restored_state=allow,
            once=once,
            group_ids=group_ids,
        )
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
