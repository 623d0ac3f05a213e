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
"""

from __future__ import annotations

import calendar
import contextlib
import os
import re
import time
import uuid
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import orjson

from service.errors import ConfigError, EddyError

if TYPE_CHECKING:
    import pyarrow.fs as pafs

MANIFEST = "_manifest.json"
PARTS = "_parts"
ID_PATTERN = re.compile(r"^\d{8}T\d{9}Z$")


class SnapshotNotFoundError(EddyError):
    """No complete snapshot matches. Take one (``python -m service snapshot``, or
    ``make run``, which takes one at exit) or check ``EDDY_SNAPSHOT_ROOT``/``--root``."""


def snapshot_id_at(time_ms: int) -> str:
    """A snapshot id that sorts by time: ``YYYYMMDDTHHMMSSmmmZ`` (UTC)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(time_ms // 1000)) + f"{time_ms % 1000:03d}Z"


def time_of(snapshot_id: str) -> int:
    """The id's time in epoch ms (UTC). Raises ValueError for an impossible date."""
    seconds = time.strptime(snapshot_id[:15], "%Y%m%dT%H%M%S")
    return calendar.timegm(seconds) * 1000 + int(snapshot_id[15:18])


def check_id(snapshot_id: str) -> str:
    """The id if it is one (a real UTC time in the id format); else ValueError."""
    if not ID_PATTERN.match(snapshot_id):
        raise ValueError(f"snapshot ids look like 20260101T120000000Z, not {snapshot_id!r}")
    try:
        time_of(snapshot_id)
    except ValueError:
        raise ValueError(f"snapshot id {snapshot_id!r} is not a real date and time") from None
    return snapshot_id


@dataclass(frozen=True)
class SnapshotRoot:
    """A snapshot root on some filesystem; ``base`` is the root's path on it.
    ``filesystem`` None: a local directory."""

    filesystem: pafs.FileSystem | None
    base: str
    uri: str

    @classmethod
    def open(cls, uri: str) -> SnapshotRoot:
        """A local path (relative or absolute) or a URI (``s3://bucket/prefix``,
        ``file:///...``); credentials of object stores come from the environment."""
        if "://" not in uri:
            path = os.path.abspath(uri)
            return cls(None, path, path)
        # pyarrow costs a process about 50 MB of memory: it is imported where a
        # snapshot root is used, not with Eddy. A URI is checked when the worker
        # starts, so it needs it here already; a local directory waits until used.
        import pyarrow.fs as pafs

        try:
            fs, base = pafs.FileSystem.from_uri(uri)
        except (ValueError, OSError) as exc:  # ArrowInvalid is a ValueError
            raise ConfigError(
                f"cannot open snapshot root {uri!r} ({exc}): set EDDY_SNAPSHOT_ROOT"
            ) from None
        return cls(fs, base.rstrip("/"), uri.rstrip("/"))

    @cached_property
    def fs(self) -> pafs.FileSystem:
        if self.filesystem is not None:
            return self.filesystem
        import pyarrow.fs as pafs

        return pafs.LocalFileSystem()

    @property
    def local(self) -> bool:
        return self.filesystem is None or bool(self.filesystem.type_name == "local")

    def app_dir(self, app_id: str) -> str:
        return f"{self.base}/{app_id}"

    def snapshot_dir(self, app_id: str, snapshot_id: str) -> str:
        return f"{self.app_dir(app_id)}/{snapshot_id}"

    def url_of(self, path: str) -> str:
        """A path on this root as Spark (Hadoop) names it: s3a:// for S3."""
        if self.local:
            return path
        scheme = "s3a" if self.fs.type_name == "s3" else self.fs.type_name
        return f"{scheme}://{path}"

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
        with contextlib.suppress(FileNotFoundError, OSError):
            self.fs.delete_dir(path)

    # -- reading -------------------------------------------------------------------

    def manifests(self, app_id: str) -> list[dict[str, Any]]:
        """Manifests of the complete snapshots of ``app_id``, oldest first."""
        found = []
        for info in self.directories(self.app_dir(app_id)):
            if not ID_PATTERN.match(info.base_name):
                continue
            path = f"{info.path}/{MANIFEST}"
            if self.exists(path):
                found.append(self.read_json(path))
        return sorted(found, key=lambda m: (m["created_ms"], m["snapshot_id"]))

    def manifest(self, app_id: str, snapshot_id: str | None = None) -> dict[str, Any]:
        """The manifest of snapshot ``snapshot_id``, or of the newest complete one."""
        if snapshot_id is not None:
            path = f"{self.snapshot_dir(app_id, snapshot_id)}/{MANIFEST}"
            if not self.exists(path):
                raise SnapshotNotFoundError(
                    f"no complete snapshot {snapshot_id!r} of app {app_id!r} under {self.uri}"
                )
            manifest: dict[str, Any] = self.read_json(path)
            return manifest
        manifests = self.manifests(app_id)
        if not manifests:
            raise SnapshotNotFoundError(f"no complete snapshot of app {app_id!r} under {self.uri}")
        return manifests[-1]

    def files(self, manifest: dict[str, Any], pipeline: str, table: str) -> list[str]:
        """Paths (on this root's filesystem) of one table's files in a snapshot."""
        base = self.snapshot_dir(manifest["app_id"], manifest["snapshot_id"])
        return [
            f"{base}/{file}"
            for part in manifest["parts"]
            if part["pipeline"] == pipeline
            for file in part["tables"].get(table, {}).get("files", [])
        ]
