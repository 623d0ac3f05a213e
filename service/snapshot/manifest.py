"""What a snapshot's (or savepoint's) manifest may say, checked before any of it
becomes a path.

A manifest is a file on a shared root: anyone who can write there can write one,
and a worker or an old Eddy may have left one half right. Every name in it that
later becomes a path (the app, the id, a pipeline, a table, a file) is checked
here to be one folder name, or the one relative layout the export writes, so no
manifest can point a reader or a delete outside its snapshot's folder. A
manifest that fails is *broken*: listed with the reason, never used.
"""

from __future__ import annotations

import calendar
import re
import time
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    model_validator,
)

ID_PATTERN = re.compile(r"^\d{8}T\d{9}Z$")
# The settings' app id (EDDY_APP_ID) without "." and "..": an app id is a folder.
APP_ID_PATTERN = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9._-]{1,100}$")
# One folder name: no separator, no NUL, not "." or "..".
SEGMENT_PATTERN = re.compile(r"^(?!\.{1,2}$)[^/\\\x00]{1,255}$")
# The file name the export gives a table's Parquet file (a token per export).
FILE_PATTERN = re.compile(r"^part-[A-Za-z0-9_-]{1,64}\.parquet$")
# Far more than any real manifest (one entry per file: 1,000 partitions of 20
# tables make about 3 MB), little enough to read into memory without a thought.
MAX_MANIFEST_BYTES = 64 * 1024 * 1024


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


def check_app_id(app_id: str) -> str:
    """The app id if it can name a folder; else ValueError."""
    if not APP_ID_PATTERN.match(app_id):
        raise ValueError(
            f"app id {app_id!r} is not a folder name: 1-100 of A-Z a-z 0-9 . _ -, and not . or .."
        )
    return app_id


def check_segment(name: str) -> str:
    """``name`` if it is one folder name (a pipeline's, a table's); else ValueError."""
    if not SEGMENT_PATTERN.match(name):
        raise ValueError(f"{name!r} is not a folder name (a /, a NUL, . or .., or empty)")
    return name


SnapshotId = Annotated[str, AfterValidator(check_id)]
AppId = Annotated[str, AfterValidator(check_app_id)]
Segment = Annotated[str, AfterValidator(check_segment)]


class _Strict(BaseModel):
    # Strict types (a "5" is not a 5); unknown fields ignored, so a manifest of a
    # newer Eddy that adds one still reads.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class TableFiles(_Strict):
    rows: NonNegativeInt
    files: list[str]


class Part(_Strict):
    """One partition's export (``_parts/<pipeline>-<partition>.json``)."""

    pipeline: Segment
    partition: NonNegativeInt
    partition_count: PositiveInt
    worker_id: str
    taken_ms: int
    committed_offsets: dict[str, int]
    watermark_ms: int | None
    changelog_offset: int
    rows: NonNegativeInt
    tables: dict[Segment, TableFiles]
    table_versions: dict[str, PositiveInt] = Field(default_factory=dict)
    end_offsets: dict[str, int] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _files_in_layout(self) -> Part:
        if self.partition >= self.partition_count:
            raise ValueError(f"partition {self.partition} of {self.partition_count}")
        # Exactly the paths export_partition writes: relative, inside the table's
        # own folder, so a reader joins them to the snapshot's folder safely.
        for table, info in self.tables.items():
            folder = f"{relative_folder(self.pipeline, table, self.partition)}/"
            for file in info.files:
                name = file.removeprefix(folder)
                if name == file or not FILE_PATTERN.match(name):
                    raise ValueError(
                        f"table {table!r} lists file {file!r}, not {folder}part-<token>.parquet"
                    )
        return self


class Manifest(_Strict):
    """``_manifest.json``: a complete snapshot or savepoint."""

    snapshot_id: SnapshotId
    kind: Literal["snapshot", "savepoint"] = "snapshot"
    app_id: AppId
    schema_version: PositiveInt
    created_ms: int
    completed_ms: int
    complete: bool
    pipelines: dict[Segment, PositiveInt]
    rows: NonNegativeInt
    parts: list[Part]

    @model_validator(mode="after")
    def _parts_of_its_pipelines(self) -> Manifest:
        seen: set[tuple[str, int]] = set()
        for part in self.parts:
            count = self.pipelines.get(part.pipeline)
            if count is None:
                raise ValueError(f"a part of pipeline {part.pipeline!r}, which it does not list")
            if part.partition_count != count:
                raise ValueError(
                    f"a part of {part.pipeline!r} says {part.partition_count} partitions, "
                    f"the manifest {count}"
                )
            if (part.pipeline, part.partition) in seen:
                raise ValueError(f"partition {part.partition} of {part.pipeline!r} twice")
            seen.add((part.pipeline, part.partition))
        return self


def relative_folder(pipeline: str, table: str, partition: int) -> str:
    """Where a table's files of one partition go, under the snapshot's folder."""
    return f"pipeline={pipeline}/table={table}/partition={partition}"


def parse_manifest(data: bytes) -> dict[str, Any]:
    """The manifest in ``data``, checked, as the dictionary readers use.

    Raises:
        ValueError: why it is broken, in one line.
    """
    return _parse(Manifest, data)


def check_part(part: dict[str, Any]) -> dict[str, Any]:
    """A part manifest, checked (see :func:`parse_manifest`)."""
    try:
        return Part.model_validate(part).model_dump()
    except ValidationError as exc:
        raise ValueError(reason(exc)) from None


def check_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """A manifest about to be published, checked as readers will check it."""
    try:
        return Manifest.model_validate(manifest).model_dump()
    except ValidationError as exc:
        raise ValueError(reason(exc)) from None


def _parse(model: type[_Strict], data: bytes) -> dict[str, Any]:
    try:
        return model.model_validate_json(data).model_dump()
    except ValidationError as exc:
        raise ValueError(reason(exc)) from None


def reason(exc: ValidationError) -> str:
    """A validation error as one line: the first problem, where it is, and how
    many more there are."""
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "missing":
        message = "missing"
    elif first["type"] == "json_invalid":
        message = f"not JSON ({first.get('ctx', {}).get('error', 'invalid')})"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"{where}: {message}{more}" if where else f"{message}{more}"
