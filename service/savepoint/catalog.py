"""Savepoints under ``EDDY_SAVEPOINT_ROOT``: finding one to resume from, and the
marker ``stop --savepoint`` leaves so a plain restart does not go on from older
commits. Listing and disposing are ``service/snapshot/catalog.py``'s, as for
snapshots (both share one layout)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from eddy.errors import ConfigError
from eddy.redact import redact
from eddy.settings import Settings
from eddy.snapshot import catalog
from eddy.snapshot.layout import SnapshotRoot
from eddy.snapshot.manifest import SnapshotId, reason


def open_root(settings: Settings) -> SnapshotRoot:
    return catalog.open_root(settings, "savepoint")


def locate(settings: Settings, reference: str) -> tuple[SnapshotRoot, dict[str, Any]]:
    """The savepoint ``reference`` names (see :func:`eddy.snapshot.catalog.locate`)."""
    return catalog.locate(settings, "savepoint", reference)


# Written by ``stop --savepoint``, removed by a restore: a worker started without
# --from-savepoint refuses to run, since what it processed would be processed again
# by a later resume (a Kubernetes pod restarts its exited container by itself).
STOPPED = "_stopped.json"


class StoppedMarker(BaseModel):
    """What ``_stopped.json`` holds. Its savepoint id is shown as the command to run,
    so it is checked to be an id like any other."""

    model_config = ConfigDict(strict=True, extra="ignore")

    savepoint_id: SnapshotId
    stopped_ms: int


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
        root.confine(path)
        with root.fs.open_input_stream(path) as stream:
            data = stream.read(64 * 1024)
    except OSError as exc:
        raise ConfigError(
            f"cannot read the savepoint root {root.shown} ({redact(str(exc))}): check "
            "EDDY_SAVEPOINT_ROOT and its credentials"
        ) from None
    try:
        marker = StoppedMarker.model_validate_json(data)
    except ValidationError as exc:
        # Still stopped: whoever wrote it meant the app to stay stopped. The marker
        # just cannot say from which savepoint to resume.
        raise ConfigError(
            f"app {settings.app_id} was stopped with a savepoint, but {root.url_of(path)} is "
            f"broken ({reason(exc)}): start it with --from-savepoint ID (`eddy savepoint "
            "list` shows them), or delete that file to go on from its last commits"
        ) from None
    raise ConfigError(
        f"app {settings.app_id} was stopped with savepoint {marker.savepoint_id}: start it "
        f"with --from-savepoint {marker.savepoint_id} (it resumes exactly there), or delete "
        f"{root.url_of(path)} to go on from its last commits"
    )


def clear_stopped(settings: Settings) -> None:
    root, path = _stopped(settings)
    if root.exists(path):
        root.fs.delete_file(root.confine(path))
