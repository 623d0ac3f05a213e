"""Savepoints under ``EDDY_SAVEPOINT_ROOT``: finding one to resume from, and the
marker ``stop --savepoint`` leaves so a plain restart does not go on from older
commits. Listing and disposing are ``service/snapshot/catalog.py``'s, as for
snapshots (both share one layout)."""

from __future__ import annotations

from typing import Any

from service.errors import ConfigError
from service.settings import Settings
from service.snapshot import catalog
from service.snapshot.layout import SnapshotRoot


def open_root(settings: Settings) -> SnapshotRoot:
    return catalog.open_root(settings, "savepoint")


def locate(settings: Settings, reference: str) -> tuple[SnapshotRoot, dict[str, Any]]:
    """The savepoint ``reference`` names (see :func:`service.snapshot.catalog.locate`)."""
    return catalog.locate(settings, "savepoint", reference)


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
