"""Where snapshots live and how they are published: one code path for a local
directory and an S3-compatible URI (``pyarrow.fs``).

Layout under the root::

    <root>/<app>/<snapshot id>/
        pipeline=<p>/table=<t>/partition=<n>/part-<token>.parquet
        _parts/<pipeline>-<partition>.json    one per exported partition
        _manifest.json                        written last: the snapshot exists

A partition's files are written first, then its part manifest; whoever writes
the last missing part manifest (any worker) merges them into ``_manifest.json``
by an atomic rename (on object stores, which cannot rename, one object upload:
the object appears whole when the upload completes, or never).
Readers only see snapshots with a manifest, and read only the files it lists:
files of a crashed or repeated export are never read.

Every path is built from names checked to be folder names (``manifest.py``) and
confined to the root before anything is read or deleted: on a local root by
resolving it (symbolic links included), on an object store by its key. A
snapshot's folder is the one its id names, never one its manifest names: a
manifest that disagrees with its folder is broken.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from eddy.errors import ConfigError, EddyError
from eddy.redact import redact, redact_url
from eddy.snapshot.manifest import (
    ID_PATTERN,
    MAX_MANIFEST_BYTES,
    check_app_id,
    check_id,
    parse_manifest,
    time_of,
)

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = [
    "ID_PATTERN",
    "MANIFEST",
    "PARTS",
    "Broken",
    "BrokenSnapshotError",
    "OutsideRootError",
    "Scan",
    "SnapshotNotFoundError",
    "SnapshotRoot",
    "check_id",
    "is_id",
    "snapshot_id_at",
    "time_of",
]

MANIFEST = "_manifest.json"
PARTS = "_parts"


class SnapshotNotFoundError(EddyError):
    """No complete snapshot matches. Take one (``python -m eddy snapshot``, or
    ``make run``, which takes one at exit) or check ``EDDY_SNAPSHOT_ROOT``/``--root``."""


class BrokenSnapshotError(EddyError):
    """A snapshot's (or savepoint's) manifest cannot be used: unreadable, not what
    Eddy writes, or naming something outside its folder. Eddy neither reads nor
    deletes it (``eddy snapshot list`` says why); look at its folder, and delete
    it by hand if nobody needs it."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


class OutsideRootError(BrokenSnapshotError):
    """A name (from a manifest, a request, a command line or a symbolic link) would
    lead outside the snapshot or savepoint root; Eddy refuses to go there. Check
    the name, or the link under the root."""


@dataclass(frozen=True)
class Broken:
    """A snapshot folder with a manifest that cannot be used, and why."""

    snapshot_id: str
    app_id: str
    location: str
    reason: str


@dataclass(frozen=True)
class Scan:
    """The snapshots of one app: complete ones (manifests, oldest first) and broken ones."""

    manifests: list[dict[str, Any]]
    broken: list[Broken]


def snapshot_id_at(time_ms: int) -> str:
    """A snapshot id that sorts by time: ``YYYYMMDDTHHMMSSmmmZ`` (UTC)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(time_ms // 1000)) + f"{time_ms % 1000:03d}Z"


@dataclass(frozen=True)
class SnapshotRoot:
    """A snapshot root on some filesystem; ``base`` is the root's path on it.
    ``filesystem`` None: a local directory. ``kind`` names what it holds in messages."""

    filesystem: pafs.FileSystem | None
    base: str
    uri: str
    kind: str = "snapshot"

    @classmethod
    def open(cls, uri: str, kind: str = "snapshot") -> SnapshotRoot:
        """A local path (relative or absolute) or a URI (``s3://bucket/prefix``,
        ``file:///...``); credentials of object stores come from the environment."""
        if "://" not in uri:
            path = os.path.abspath(uri)
            return cls(None, path, path, kind)
        # pyarrow costs a process about 50 MB of memory: it is imported where a
        # snapshot root is used, not with Eddy. A URI is checked when the worker
        # starts, so it needs it here already; a local directory waits until used.
        import pyarrow.fs as pafs

        try:
            fs, base = pafs.FileSystem.from_uri(uri)
        except (ValueError, OSError) as exc:  # ArrowInvalid is a ValueError
            raise ConfigError(
                f"cannot open {kind} root {redact_url(uri)!r} ({redact(str(exc))}): "
                f"set EDDY_{kind.upper()}_ROOT"
            ) from None
        return cls(fs, base.rstrip("/"), uri.rstrip("/"), kind)

    @cached_property
    def fs(self) -> pafs.FileSystem:
        if self.filesystem is not None:
            return self.filesystem
        import pyarrow.fs as pafs

        return pafs.LocalFileSystem()

    @property
    def local(self) -> bool:
        return self.filesystem is None or bool(self.filesystem.type_name == "local")

    @property
    def shown(self) -> str:
        """The root as messages show it: credentials in the URI masked."""
        return redact_url(self.uri)

    def app_dir(self, app_id: str) -> str:
        """The app's folder. Raises OutsideRootError unless ``app_id`` is a folder name."""
        try:
            check_app_id(app_id)
        except ValueError as exc:
            raise OutsideRootError(f"{exc}: refused under the {self.kind} root") from None
        return f"{self.base}/{app_id}"

    def snapshot_dir(self, app_id: str, snapshot_id: str) -> str:
        """One snapshot's folder. Raises OutsideRootError unless both are valid names."""
        try:
            check_id(snapshot_id)
        except ValueError as exc:
            raise OutsideRootError(f"{exc}: refused under the {self.kind} root") from None
        return f"{self.app_dir(app_id)}/{snapshot_id}"

    def url_of(self, path: str) -> str:
        """A path on this root as Spark (Hadoop) names it: s3a:// for S3."""
        if self.local:
            return path
        scheme = "s3a" if self.fs.type_name == "s3" else self.fs.type_name
        return f"{scheme}://{path}"

    def confine(self, path: str) -> str:
        """``path`` if it lies strictly under the root, where it really leads.

        Local roots compare resolved paths, so a symbolic link (of a folder or a
        file, anywhere on the way) that leads out is refused; object stores have
        no links, and a key must stay under the root's prefix, with no empty,
        ``.`` or ``..`` segment.

        Raises:
            OutsideRootError: it does not.
        """
        if self.local:
            root = Path(self.base).resolve()
            real = Path(path).resolve()
            if real == root or not real.is_relative_to(root):
                raise OutsideRootError(
                    f"{path} leads to {real}, outside the {self.kind} root {root}: refused"
                )
            return path
        key = path.removeprefix(f"{self.base}/")
        if key == path or any(s in ("", ".", "..") for s in key.split("/")):
            raise OutsideRootError(
                f"{redact_url(path)} is not a key under the {self.kind} root {self.shown}: refused"
            )
        return path

    # -- writing -------------------------------------------------------------------

    def write_json(self, path: str, value: Any) -> None:
        """Write ``value`` so that readers see all of it or nothing."""
        data = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        parent = path.rsplit("/", 1)[0]
        self.fs.create_dir(parent, recursive=True)
        if not self.local:
            # One object upload (pyarrow sends a multipart upload): S3 shows the
            # object only once the upload completes, whole. A writer killed before
            # that leaves no object, only an unfinished upload nobody lists.
            with self.fs.open_output_stream(path) as out:
                out.write(data)
            return
        temporary = f"{path}.tmp-{uuid.uuid4().hex}"
        with self.fs.open_output_stream(temporary) as out:
            out.write(data)
        self.fs.move(temporary, path)  # rename(2): atomic on one filesystem

    def read_json(self, path: str) -> Any:
        with self.fs.open_input_stream(path) as stream:
            return orjson.loads(stream.read())

    def exists(self, path: str) -> bool:
        import pyarrow.fs as pafs  # loaded by self.fs already

        return bool(self.fs.get_file_info(path).type != pafs.FileType.NotFound)

    def listdir(self, path: str) -> list[pafs.FileInfo]:
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(path, allow_not_found=True)
        return list(self.fs.get_file_info(selector))

    def directories(self, path: str) -> list[pafs.FileInfo]:
        """The folders directly under ``path`` (none if it does not exist)."""
        import pyarrow.fs as pafs

        return [i for i in self.listdir(path) if i.type == pafs.FileType.Directory]

    def plain_files(self, path: str) -> list[pafs.FileInfo]:
        """The files directly under ``path`` (none if it does not exist)."""
        import pyarrow.fs as pafs

        return [i for i in self.listdir(path) if i.type == pafs.FileType.File]

    def delete_dir(self, path: str) -> None:
        """Delete a folder under the root (gone already is fine).

        Raises:
            OutsideRootError: ``path`` leads outside the root.
            OSError: it could not be deleted.
        """
        self.confine(path)
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_dir(path)

    # -- reading -------------------------------------------------------------------

    def read_manifest(self, app_id: str, snapshot_id: str) -> dict[str, Any]:
        """The manifest of one snapshot, checked: valid, and about this very folder.

        Raises:
            SnapshotNotFoundError: it has none (absent, or not complete).
            BrokenSnapshotError: it has one that cannot be used (the reason says why).
        """
        import pyarrow.fs as pafs

        path = f"{self.snapshot_dir(app_id, snapshot_id)}/{MANIFEST}"
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise SnapshotNotFoundError(
                f"no complete {self.kind} {snapshot_id!r} of app {app_id!r} under {self.shown}"
            )
        try:
            manifest = self._checked(path, info)
        except OutsideRootError as exc:
            raise self._broken(app_id, snapshot_id, str(exc)) from None
        except (ValueError, OSError) as exc:
            raise self._broken(app_id, snapshot_id, f"{MANIFEST}: {exc}") from None
        named = (manifest["app_id"], manifest["snapshot_id"])
        if named != (app_id, snapshot_id):
            reason = f"{MANIFEST} names {named[0]}/{named[1]} but lies in {app_id}/{snapshot_id}"
            raise self._broken(app_id, snapshot_id, reason)
        return manifest

    def _checked(self, path: str, info: pafs.FileInfo) -> dict[str, Any]:
        import pyarrow.fs as pafs

        self.confine(path)
        if info.type != pafs.FileType.File:
            raise ValueError("not a file")
        if info.size is not None and info.size > MAX_MANIFEST_BYTES:
            raise ValueError(f"{info.size} bytes, more than {MAX_MANIFEST_BYTES} bytes")
        with self.fs.open_input_stream(path) as stream:
            data = stream.read(MAX_MANIFEST_BYTES + 1)
        if len(data) > MAX_MANIFEST_BYTES:
            raise ValueError(f"more than {MAX_MANIFEST_BYTES} bytes")
        return parse_manifest(data)

    def _broken(self, app_id: str, snapshot_id: str, reason: str) -> BrokenSnapshotError:
        shown = redact(reason)
        return BrokenSnapshotError(
            f"{self.kind} {snapshot_id} of {app_id} is broken, so it is neither read nor "
            f"deleted: {shown}",
            shown,
        )

    def scan(self, app_id: str) -> Scan:
        """Every snapshot folder of ``app_id`` with a manifest, oldest first: the
        complete ones, and the broken ones with the reason. Folders without a
        manifest are in progress (or abandoned) and not listed."""
        manifests: list[dict[str, Any]] = []
        broken: list[Broken] = []
        for info in sorted(self.directories(self.app_dir(app_id)), key=lambda i: i.base_name):
            name = info.base_name
            if not is_id(name) or not self.exists(f"{info.path}/{MANIFEST}"):
                continue
            try:
                manifests.append(self.read_manifest(app_id, name))
            except BrokenSnapshotError as exc:
                broken.append(Broken(name, app_id, self.url_of(info.path), exc.reason))
        return Scan(manifests, broken)

    def manifests(self, app_id: str) -> list[dict[str, Any]]:
        """Manifests of the complete snapshots of ``app_id``, oldest first."""
        return self.scan(app_id).manifests

    def manifest(self, app_id: str, snapshot_id: str | None = None) -> dict[str, Any]:
        """The manifest of snapshot ``snapshot_id``, or of the newest complete one.

        Raises:
            SnapshotNotFoundError: there is none.
            BrokenSnapshotError: the one named is broken.
            OutsideRootError: ``app_id`` or ``snapshot_id`` is no valid name.
        """
        if snapshot_id is not None:
            return self.read_manifest(app_id, snapshot_id)
        manifests = self.manifests(app_id)
        if not manifests:
            raise SnapshotNotFoundError(
                f"no complete {self.kind} of app {app_id!r} under {self.shown}"
            )
        return manifests[-1]

    def files(self, manifest: dict[str, Any], pipeline: str, table: str) -> list[str]:
        """Paths (on this root's filesystem) of one table's files in a snapshot, each
        confined to the root (OutsideRootError otherwise)."""
        base = self.snapshot_dir(manifest["app_id"], manifest["snapshot_id"])
        return [
            self.confine(f"{base}/{file}")
            for part in manifest["parts"]
            if part["pipeline"] == pipeline
            for file in part["tables"].get(table, {}).get("files", [])
        ]


def is_id(name: str) -> bool:
    """Whether a folder's name is a snapshot id (a real time)."""
    try:
        check_id(name)
    except ValueError:
        return False
    return True
