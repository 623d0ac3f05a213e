"""Finding, describing and disposing of savepoints under ``EDDY_SAVEPOINT_ROOT``.

Savepoints share the snapshots' layout and publication (``service/snapshot``):
``<root>/<app>/<id>/_manifest.json`` plus Parquet files per table and partition.
"""

from __future__ import annotations

from typing import Any

import pyarrow.fs as pafs

from service.errors import ConfigError
from service.settings import Settings
from service.snapshot.layout import ID_PATTERN, MANIFEST, SnapshotNotFoundError, SnapshotRoot


class SavepointNotFoundError(SnapshotNotFoundError):
    """No such savepoint: ``python -m service savepoint list`` shows them."""


def open_root(settings: Settings) -> SnapshotRoot:
    return SnapshotRoot.open(settings.savepoint_root)


def summary(root: SnapshotRoot, manifest: dict[str, Any]) -> dict[str, Any]:
    """What a user wants to know of a savepoint, without its per-file detail."""
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
        "savepoint_id": manifest["snapshot_id"],
        "app_id": manifest["app_id"],
        "created_ms": manifest["created_ms"],
        "rows": manifest["rows"],
        "location": root.url_of(root.snapshot_dir(manifest["app_id"], manifest["snapshot_id"])),
        "pipelines": pipelines,
    }


def listing(settings: Settings) -> list[dict[str, Any]]:
    """Every complete savepoint of the app, oldest first, summarised."""
    root = open_root(settings)
    return [summary(root, m) for m in root.manifests(settings.app_id)]


def locate(settings: Settings, reference: str) -> tuple[SnapshotRoot, dict[str, Any]]:
    """The savepoint ``reference`` names: ``<id>`` of this app, or ``<app>/<id>``
    (another app's: resuming into a new app id), or ``<id>`` of the only app that
    has it.

    Raises:
        SavepointNotFoundError: none, or several apps have that id.
    """
    root = open_root(settings)
    app, _, savepoint_id = reference.rpartition("/")
    if not ID_PATTERN.match(savepoint_id):
        raise SavepointNotFoundError(
            f"{reference!r} is not a savepoint id (they look like 20260101T120000000Z, "
            "optionally after <app>/)"
        )
    apps = [app] if app else [settings.app_id, *_other_apps(root, settings.app_id)]
    found = [a for a in apps if root.exists(f"{root.snapshot_dir(a, savepoint_id)}/{MANIFEST}")]
    if not found:
        raise SavepointNotFoundError(
            f"no complete savepoint {reference!r} under {root.uri}: "
            "`python -m service savepoint list` shows this app's, EDDY_SAVEPOINT_ROOT sets where"
        )
    if len(found) > 1 and not app and found[0] != settings.app_id:
        raise SavepointNotFoundError(
            f"apps {', '.join(found)} each have savepoint {savepoint_id}: name one as <app>/<id>"
        )
    return root, root.manifest(found[0], savepoint_id)


def dispose(settings: Settings, savepoint_id: str) -> str:
    """Delete one of this app's savepoints; returns where it was."""
    root, manifest = locate(settings, f"{settings.app_id}/{savepoint_id}")
    path = root.snapshot_dir(manifest["app_id"], manifest["snapshot_id"])
    root.delete_dir(path)
    return root.url_of(path)


def _other_apps(root: SnapshotRoot, app_id: str) -> list[str]:
    return sorted(
        info.base_name
        for info in root.listdir(root.base)
        if info.type == pafs.FileType.Directory and info.base_name != app_id
    )


# Written by ``stop --savepoint``, removed by a restore: a worker started without
# --from-savepoint refuses to run, since what it processed would be processed again
# by a later resume (a Kubernetes pod restarts its exited container by itself).
STOPPED = "_stopped.json"


def _stopped(settings: Settings) -> tuple[SnapshotRoot, str]:
    root = open_root(settings)
    return root, f"{root.app_dir(settings.app_id)}/{STOPPED}"


def mark_stopped(settings: Settings, savepoint_id: str, stopped_ms: int) -> None:
    root, path = _stopped(settings)
    root.write_json(path, {"savepoint_id": savepoint_id, "stopped_ms": stopped_ms})


def check_not_stopped(settings: Settings) -> None:
    """Raises ConfigError if the app was stopped with a savepoint and not resumed."""
    root, path = _stopped(settings)
    try:
        if not root.exists(path):
            return
        marker = root.read_json(path)
    except OSError as exc:
        raise ConfigError(
            f"cannot read the savepoint root {root.uri} ({exc}): check EDDY_SAVEPOINT_ROOT "
            "and its credentials"
        ) from None
    raise ConfigError(
        f"app {settings.app_id} was stopped with savepoint {marker['savepoint_id']}: start it "
        f"with --from-savepoint {marker['savepoint_id']} (it resumes exactly there), or delete "
        f"{root.url_of(path)} to go on from its last commits"
    )


def clear_stopped(settings: Settings) -> None:
    root, path = _stopped(settings)
    if root.exists(path):
        root.fs.delete_file(path)
