"""Finding, describing and disposing of snapshots and savepoints.

Both share one layout (``<root>/<app>/<id>/_manifest.json`` plus Parquet files
per table and partition, ``service/snapshot/layout.py``); snapshots live under
``EDDY_SNAPSHOT_ROOT`` and are pruned to ``EDDY_SNAPSHOT_RETAIN``, savepoints
under ``EDDY_SAVEPOINT_ROOT`` and are kept until disposed of.

A name a user gives (an id, ``<app>/<id>``) is checked before it becomes a path,
and what is disposed of is the folder that name leads to, never a folder a
manifest names; a broken manifest is listed with its reason, and neither shown
nor disposed of.
"""

from __future__ import annotations

from typing import Any, Literal

from eddy.settings import Settings
from eddy.snapshot.layout import (
    MANIFEST,
    Broken,
    SnapshotNotFoundError,
    SnapshotRoot,
    is_id,
    time_of,
)
from eddy.snapshot.manifest import APP_ID_PATTERN

Kind = Literal["snapshot", "savepoint"]


def open_root(settings: Settings, kind: Kind) -> SnapshotRoot:
    return SnapshotRoot.open(
        settings.savepoint_root if kind == "savepoint" else settings.snapshot_root, kind
    )


def summary(root: SnapshotRoot, manifest: dict[str, Any]) -> dict[str, Any]:
    """What a user wants to know of one, without its per-file detail."""
    pipelines: dict[str, dict[str, Any]] = {}
    for name, count in manifest["pipelines"].items():
        parts = [p for p in manifest["parts"] if p["pipeline"] == name]
        tables: dict[str, dict[str, int]] = {}
        for part in parts:
            for table, info in part["tables"].items():
                entry = tables.setdefault(
                    table, {"rows": 0, "version": part.get("table_versions", {}).get(table, 1)}
                )
                entry["rows"] += info["rows"]
        pipelines[name] = {
            "partitions": count,
            "rows": sum(p["rows"] for p in parts),
            "tables": tables,
            "committed_offsets": {str(p["partition"]): p["committed_offsets"] for p in parts},
            "watermarks_ms": {str(p["partition"]): p["watermark_ms"] for p in parts},
        }
    return {
        "id": manifest["snapshot_id"],
        "app_id": manifest["app_id"],
        "created_ms": manifest["created_ms"],
        "rows": manifest["rows"],
        "location": root.url_of(root.snapshot_dir(manifest["app_id"], manifest["snapshot_id"])),
        "stages": pipelines,
    }


def listing(settings: Settings, kind: Kind) -> list[dict[str, Any]]:
    """Every complete one of the app and every broken one, oldest first: a summary
    each, whose ``broken`` is why it cannot be used (None when it can)."""
    root = open_root(settings, kind)
    scan = root.scan(settings.app_id)
    found = [{**summary(root, m), "broken": None} for m in scan.manifests]
    found += [broken_summary(b) for b in scan.broken]
    return sorted(found, key=lambda s: str(s["id"]))


def broken_summary(broken: Broken) -> dict[str, Any]:
    """What a listing says of a broken one: where it is and why it is broken."""
    return {
        "id": broken.snapshot_id,
        "app_id": broken.app_id,
        "created_ms": time_of(broken.snapshot_id),
        "location": broken.location,
        "broken": broken.reason,
    }


def locate(settings: Settings, kind: Kind, reference: str) -> tuple[SnapshotRoot, dict[str, Any]]:
    """The one ``reference`` names: ``<id>`` of this app, or ``<app>/<id>``
    (another app's: resuming into a new app id), or ``<id>`` of the only app that
    has it.

    Raises:
        SnapshotNotFoundError: none, several apps have that id, or ``reference``
            is no ``[<app>/]<id>``.
        BrokenSnapshotError: its manifest is broken, or leads outside the root.
    """
    root = open_root(settings, kind)
    app, _, found_id = reference.rpartition("/")
    if not is_id(found_id) or (app and not APP_ID_PATTERN.match(app)):
        raise SnapshotNotFoundError(
            f"{reference!r} is not a {kind} id (they look like 20260101T120000000Z, "
            "optionally after <app>/, an app id without /)"
        )
    apps = [app] if app else [settings.app_id, *_other_apps(root, settings.app_id)]
    found = [a for a in apps if root.exists(f"{root.snapshot_dir(a, found_id)}/{MANIFEST}")]
    if not found:
        variable = "EDDY_SAVEPOINT_ROOT" if kind == "savepoint" else "EDDY_SNAPSHOT_ROOT"
        raise SnapshotNotFoundError(
            f"no complete {kind} {reference!r} under {root.shown}: `eddy {kind} list` shows "
            f"this app's, {variable} sets where"
        )
    if len(found) > 1 and not app and found[0] != settings.app_id:
        raise SnapshotNotFoundError(
            f"apps {', '.join(found)} each have {kind} {found_id}: name one as <app>/<id>"
        )
    return root, root.read_manifest(found[0], found_id)


def dispose(settings: Settings, kind: Kind, found_id: str) -> str:
    """Delete one of this app's; returns where it was.

    The folder deleted is the one ``found_id`` names under this app's folder, and
    only if its manifest is sound and agrees (it names this app and this id).

    Raises:
        SnapshotNotFoundError: no such complete one (or ``found_id`` is no id).
        BrokenSnapshotError: its manifest is broken, or it leads outside the root.
    """
    if not is_id(found_id):
        raise SnapshotNotFoundError(
            f"{found_id!r} is not a {kind} id (they look like 20260101T120000000Z): only "
            "this app's can be disposed of, by id"
        )
    path = open_root(settings, kind).snapshot_dir(settings.app_id, found_id)
    root, _ = locate(settings, kind, f"{settings.app_id}/{found_id}")
    root.delete_dir(path)
    return root.url_of(path)


def _other_apps(root: SnapshotRoot, app_id: str) -> list[str]:
    return sorted(
        info.base_name
        for info in root.directories(root.base)
        if info.base_name != app_id and APP_ID_PATTERN.match(info.base_name)
    )
