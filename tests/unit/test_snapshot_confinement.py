"""Snapshots and savepoints stay inside their roots, whatever a manifest, a command
line or a symbolic link says: a hostile or broken one is listed as broken with the
reason, and disposing of it, showing it or restoring from it is refused in one line;
nothing outside the root is read or deleted. No Kafka: the roots are in tmp_path."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eddy import examples
from eddy.cli import main as eddy
from eddy.errors import ConfigError
from eddy.savepoint.catalog import check_not_stopped, mark_stopped
from eddy.savepoint.restore import _saved_rows, restore
from eddy.settings import Settings, build
from eddy.snapshot import catalog
from eddy.snapshot.layout import (
    MANIFEST,
    PARTS,
    BrokenSnapshotError,
    OutsideRootError,
    SnapshotRoot,
)
from eddy.snapshot.manifest import Manifest, Part, parse_manifest
from eddy.snapshot.publish import PartitionCut, complete, export_partition
from eddy.tables.codecs import decode_json, decode_utf8, encode_json, encode_utf8
from eddy.tables.store import PartitionStore, TableSpec
from tests.support.kafka import TEST_AGENT_SETTINGS
from tests.unit.test_snapshot_export import publish_two_partitions

ID = "20300101T000000000Z"
OTHER = "20300101T000100000Z"
KINDS = ["snapshot", "savepoint"]


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No EDDY_* variable but the roots, ``tmp_path/snapshots`` and ``.../savepoints``;
    ``tmp_path/victim`` is outside both."""
    for name in list(os.environ):
        if name.startswith("EDDY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("EDDY_SNAPSHOT_ROOT", str(tmp_path / "snapshots"))
    monkeypatch.setenv("EDDY_SAVEPOINT_ROOT", str(tmp_path / "savepoints"))
    return tmp_path


def settings_of(home: Path) -> Settings:
    return build(
        Settings,
        {"snapshot_root": str(home / "snapshots"), "savepoint_root": str(home / "savepoints")},
    )


def publish(home: Path, kind: str, found_id: str = ID, app_id: str = "eddy") -> Path:
    """A complete one of ``app_id`` under the kind's root; returns its folder."""
    root = SnapshotRoot.open(str(home / f"{kind}s"), kind)
    publish_two_partitions(root, app_id, found_id, home / "scratch", kind=kind)
    return home / f"{kind}s" / app_id / found_id


def rewrite(folder: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Change the manifest in ``folder`` as someone with write access to the root could."""
    path = folder / MANIFEST
    manifest = orjson.loads(path.read_bytes())
    change(manifest)
    path.write_bytes(orjson.dumps(manifest))


def sentinel(path: Path) -> Path:
    """A file that must survive: outside the roots, where a hostile manifest points."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "keep.txt").write_text("precious")
    return path / "keep.txt"


def one_line_error(capsys: pytest.CaptureFixture[str], start: str) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(start), err
    assert "Traceback" not in err
    return err


def listed(capsys: pytest.CaptureFixture[str], kind: str) -> list[dict[str, Any]]:
    assert eddy([kind, "list", "--json"]) == 0
    found: list[dict[str, Any]] = orjson.loads(capsys.readouterr().out)
    return found


# -- a manifest that names a place outside the root ------------------------------------


def hostile_values(home: Path) -> list[tuple[str, str]]:
    """(field, value) pairs that, joined as the manifest says, lead to ``home/victim/ID``."""
    return [
        ("app_id", "../victim"),
        ("app_id", str(home / "victim")),
        ("snapshot_id", f"../../victim/{ID}"),
        ("snapshot_id", str(home / "victim" / ID)),
    ]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", range(4))
def test_dispose_refuses_a_manifest_naming_a_place_outside_the_root(
    kind: str, case: int, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    field, value = hostile_values(home)[case]
    folder = publish(home, kind)
    rewrite(folder, lambda m: m.update({field: value}))
    keep = sentinel(home / "victim" / ID)

    assert eddy([kind, "dispose", ID]) == 2
    err = one_line_error(capsys, f"eddy: {kind} {ID} of eddy is broken, so it is neither read")
    assert field in err
    assert keep.read_text() == "precious"
    assert (folder / MANIFEST).is_file()  # refused: not deleted either

    # The listing says which and why, instead of a traceback or a silent gap.
    (entry,) = listed(capsys, kind)
    assert (entry["id"], entry["location"]) == (ID, str(folder))
    assert field in entry["broken"]
    actions = ["show", "restore"] if kind == "savepoint" else ["show"]
    for action in actions:  # restore: before Kafka is asked anything
        assert eddy([kind, action, ID]) == 2
        one_line_error(capsys, f"eddy: {kind} {ID} of eddy is broken")
    assert keep.read_text() == "precious"


def test_a_manifest_that_disagrees_with_its_folder_is_broken(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Valid names, but another snapshot's: disposing must not delete that one."""
    folder, other = publish(home, "snapshot"), publish(home, "snapshot", OTHER)
    rewrite(folder, lambda m: m.update({"snapshot_id": OTHER}))

    assert eddy(["snapshot", "dispose", ID]) == 2
    err = one_line_error(capsys, f"eddy: snapshot {ID} of eddy is broken")
    assert f"names eddy/{OTHER} but lies in eddy/{ID}" in err
    assert (other / MANIFEST).is_file()
    assert (folder / MANIFEST).is_file()
    assert [(e["id"], e["broken"] is None) for e in listed(capsys, "snapshot")] == [
        (ID, False),
        (OTHER, True),
    ]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "reference", ["../victim/" + ID, "eddy/../../victim/" + ID, "/victim/" + ID, "..", "../" + ID]
)
def test_a_reference_on_the_command_line_cannot_leave_the_root(
    kind: str, reference: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(home, kind, app_id="victim")  # home/<kind>s/victim: another app's
    keep = sentinel(home / "victim" / ID)
    for action in ("show", "dispose"):
        assert eddy([kind, action, reference]) == 2
        one_line_error(capsys, "eddy: ")
    assert keep.read_text() == "precious"
    assert (home / f"{kind}s" / "victim" / ID / MANIFEST).is_file()


def test_an_app_id_that_is_no_folder_name_is_refused_before_any_path(home: Path) -> None:
    settings = settings_of(home).model_copy(update={"app_id": ".."})
    with pytest.raises(OutsideRootError, match=re.escape("app id '..' is not a folder name")):
        catalog.listing(settings, "snapshot")
    with pytest.raises(OutsideRootError):
        catalog.dispose(settings, "snapshot", ID)


# -- symbolic links ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_snapshot_folder_linked_outside_the_root_is_broken_and_kept(
    kind: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A sound snapshot, but outside the root, linked in by its id.
    outside = SnapshotRoot.open(str(home / "victim"), kind)
    publish_two_partitions(outside, "eddy", ID, home / "scratch", kind=kind)
    target = home / "victim" / "eddy" / ID
    keep = sentinel(target)
    (home / f"{kind}s" / "eddy").mkdir(parents=True)
    (home / f"{kind}s" / "eddy" / ID).symlink_to(target, target_is_directory=True)

    (entry,) = listed(capsys, kind)
    assert "outside the " + kind + " root" in entry["broken"]
    assert eddy([kind, "dispose", ID]) == 2
    one_line_error(capsys, f"eddy: {kind} {ID} of eddy is broken")
    assert keep.read_text() == "precious"
    assert (target / MANIFEST).is_file()


def test_an_app_folder_linked_outside_the_root_is_refused(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = SnapshotRoot.open(str(home / "victim"))
    publish_two_partitions(outside, "eddy", ID, home / "scratch")
    keep = sentinel(home / "victim" / "eddy" / ID)
    (home / "snapshots").mkdir()
    (home / "snapshots" / "eddy").symlink_to(home / "victim" / "eddy", target_is_directory=True)

    assert [e["broken"] is not None for e in listed(capsys, "snapshot")] == [True]
    assert eddy(["snapshot", "dispose", ID]) == 2
    one_line_error(capsys, f"eddy: snapshot {ID} of eddy is broken")
    assert keep.read_text() == "precious"


def test_a_manifest_file_linked_outside_the_root_is_not_read(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = publish(home, "snapshot")
    secret = home / "victim" / "secret.json"
    secret.parent.mkdir()
    secret.write_bytes((folder / MANIFEST).read_bytes())  # even a valid one
    (folder / MANIFEST).unlink()
    (folder / MANIFEST).symlink_to(secret)

    (entry,) = listed(capsys, "snapshot")
    assert f"leads to {secret}, outside the snapshot root" in entry["broken"]


def test_a_data_file_linked_outside_the_root_is_neither_read_nor_restored(home: Path) -> None:
    folder = publish(home, "savepoint")
    root = SnapshotRoot.open(str(home / "savepoints"), "savepoint")
    manifest = root.manifest("eddy", ID)
    (first,) = [f for f in root.files(manifest, "sensor_averages", "results") if "=0/" in f]
    outside = home / "victim" / "results.parquet"
    outside.parent.mkdir()
    os.replace(first, outside)
    Path(first).symlink_to(outside)

    with pytest.raises(OutsideRootError, match="outside the savepoint root"):
        root.files(manifest, "sensor_averages", "results")
    with pytest.raises(BrokenSnapshotError, match="outside the savepoint root"):
        _saved_rows(root, first, "results")
    assert outside.is_file()
    assert (folder / MANIFEST).is_file()


# -- a broken manifest is listed as broken, with the reason --------------------------------


def required(model: type[Manifest] | type[Part]) -> list[str]:
    return [name for name, info in model.model_fields.items() if info.is_required()]


FIELDS = [("manifest", f) for f in required(Manifest)] + [("part", f) for f in required(Part)]


@pytest.mark.parametrize("where", FIELDS, ids=[f"{level}.{field}" for level, field in FIELDS])
def test_a_manifest_missing_a_field_is_listed_as_broken(
    where: tuple[str, str], home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    level, field = where
    folder, good = publish(home, "snapshot"), publish(home, "snapshot", OTHER)
    rewrite(folder, lambda m: (m if level == "manifest" else m["parts"][0]).pop(field))

    assert eddy(["snapshot", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{ID}  2030-01-01 00:00:00 UTC  BROKEN: ")
    assert f"{field}: missing" in out[0]
    assert out[0].endswith(str(folder))
    assert out[1].startswith(f"{OTHER}  2030-01-01 00:01:00 UTC          33 rows  ")
    assert [e["broken"] is None for e in listed(capsys, "snapshot")] == [False, True]
    assert (good / MANIFEST).is_file()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "not JSON"),
        (b"[]", "Input should be an object"),
        (b"", "not JSON"),
    ],
)
def test_a_manifest_that_is_no_json_object_is_listed_as_broken(
    content: bytes, reason: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = publish(home, "savepoint")
    (folder / MANIFEST).write_bytes(content)
    (entry,) = listed(capsys, "savepoint")
    assert reason in entry["broken"]
    assert eddy(["savepoint", "restore", ID]) == 2
    one_line_error(capsys, f"eddy: savepoint {ID} of eddy is broken")


def test_a_manifest_too_large_to_be_one_is_not_read_whole(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = publish(home, "snapshot")
    monkeypatch.setattr("eddy.snapshot.layout.MAX_MANIFEST_BYTES", 1_000)
    assert (folder / MANIFEST).stat().st_size > 1_000
    (entry,) = listed(capsys, "snapshot")
    assert "more than 1000 bytes" in entry["broken"]


@pytest.mark.parametrize(
    "file",
    [
        "../../../victim/keep.txt",
        "/etc/passwd",
        "pipeline=sensor_averages/table=results/partition=0/../../../../x.parquet",
        "pipeline=sensor_averages/table=results/partition=1/part-1.parquet",  # another's
        "pipeline=sensor_averages/table=results/partition=0/part-1.parquet/../x",
    ],
)
def test_a_manifest_listing_a_file_outside_its_folder_is_broken(
    file: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = publish(home, "snapshot")

    def point(manifest: dict[str, Any]) -> None:
        manifest["parts"][0]["tables"]["results"]["files"] = [file]

    rewrite(folder, point)
    (entry,) = listed(capsys, "snapshot")
    assert "not pipeline=sensor_averages/table=results/partition=0/part-<token>" in entry["broken"]


# -- properties: whatever the names, a path that is accepted stays in its folder ----------


@given(file=st.text(st.sampled_from("./=_-abcp0\\\x00"), max_size=30))
def test_every_file_a_valid_manifest_lists_lies_in_its_tables_folder(file: str) -> None:
    folder = "pipeline=p/table=t/partition=0"
    manifest = manifest_listing(f"{folder}/{file}")
    try:
        parsed = parse_manifest(orjson.dumps(manifest))
    except ValueError:
        return
    (listed_file,) = parsed["parts"][0]["tables"]["t"]["files"]
    joined = posixpath.normpath(f"/root/a/{ID}/{listed_file}")
    assert posixpath.dirname(joined) == f"/root/a/{ID}/{folder}"


@given(name=st.text(max_size=12) | st.sampled_from(["..", ".", "a/..", "/x", "a\x00", ""]))
def test_a_name_is_one_folder_or_refused(name: str) -> None:
    root = SnapshotRoot(None, "/root", "/root")
    builders: list[Callable[[], str]] = [
        lambda: root.app_dir(name),
        lambda: root.snapshot_dir("a", name),
    ]
    for build_path in builders:
        try:
            path = build_path()
        except OutsideRootError:
            continue
        assert posixpath.dirname(posixpath.normpath(path)) in ("/root", "/root/a")
        assert posixpath.basename(path) == name


@given(key=st.lists(st.sampled_from(["a", "..", ".", "", "b", "prefix"]), max_size=5))
def test_an_object_store_key_stays_under_the_roots_prefix(key: list[str]) -> None:
    from pyarrow._fs import _MockFileSystem

    root = SnapshotRoot(_MockFileSystem(), "bucket/prefix", "mock://bucket/prefix")
    path = "bucket/prefix/" + "/".join(key)
    try:
        root.confine(path)
    except OutsideRootError:
        return
    assert posixpath.normpath(path).startswith("bucket/prefix/")
    assert ".." not in path.split("/")


def manifest_listing(file: str) -> dict[str, Any]:
    return {
        "snapshot_id": ID,
        "app_id": "a",
        "schema_version": 1,
        "created_ms": 0,
        "completed_ms": 0,
        "complete": True,
        "pipelines": {"p": 1},
        "rows": 1,
        "parts": [
            {
                "pipeline": "p",
                "partition": 0,
                "partition_count": 1,
                "worker_id": "w",
                "taken_ms": 0,
                "committed_offsets": {},
                "watermark_ms": None,
                "changelog_offset": 0,
                "rows": 1,
                "tables": {"t": {"rows": 1, "files": [file]}},
            }
        ],
    }


# -- object stores: the same rules by key ------------------------------------------------


def test_an_object_store_refuses_a_manifest_naming_another_prefix(tmp_path: Path) -> None:
    from pyarrow._fs import _MockFileSystem

    fs = _MockFileSystem()
    root = SnapshotRoot(fs, "bucket/prefix", "mock://bucket/prefix")
    publish_two_partitions(root, "eddy", ID, tmp_path)
    fs.create_dir(f"bucket/victim/{ID}", recursive=True)
    with fs.open_output_stream(f"bucket/victim/{ID}/keep.txt") as out:
        out.write(b"precious")
    manifest = root.read_manifest("eddy", ID)
    manifest["app_id"] = "../victim"
    root.write_json(f"bucket/prefix/eddy/{ID}/{MANIFEST}", manifest)

    with pytest.raises(
        BrokenSnapshotError, match=re.escape("app_id: app id '../victim' is not a folder")
    ):
        root.read_manifest("eddy", ID)
    assert [b.snapshot_id for b in root.scan("eddy").broken] == [ID]
    with pytest.raises(OutsideRootError, match="is not a key under the snapshot root"):
        root.delete_dir(f"bucket/prefix/../victim/{ID}")
    with pytest.raises(OutsideRootError):
        root.delete_dir("bucket/prefix")  # the root itself
    with fs.open_input_stream(f"bucket/victim/{ID}/keep.txt") as stream:
        assert stream.read() == b"precious"


# -- parts, the stop marker, the export and the restore -------------------------------------


def test_a_broken_part_stops_publication_with_the_reason(tmp_path: Path) -> None:
    root = SnapshotRoot.open(str(tmp_path / "snapshots"))
    parts = tmp_path / "snapshots" / "eddy" / ID / PARTS
    parts.mkdir(parents=True)
    (parts / "p-0.json").write_text('{"pipeline": "../x", "partition": 0}')
    with pytest.raises(BrokenSnapshotError, match=r"part _parts/p-0\.json is broken \(pipeline"):
        complete(root, "eddy", ID, retain=None)
    assert not (tmp_path / "snapshots" / "eddy" / ID / MANIFEST).exists()


def test_a_table_whose_name_is_no_folder_name_is_not_exported(tmp_path: Path) -> None:
    spec = TableSpec("../../../escaped", encode_utf8, decode_utf8, encode_json, decode_json)
    store = PartitionStore(tmp_path / "db")
    txn = store.begin()
    txn.put(spec, "k", {"v": 1})
    txn.commit(txn.changelog_records(), changelog_offset=1)
    store.checkpoint(tmp_path / "cp")
    store.close()
    root = SnapshotRoot.open(str(tmp_path / "snapshots"))
    cut = PartitionCut("p", 0, tmp_path / "cp", {}, None, 1, 0, 1)
    with pytest.raises(ValueError, match=re.escape("'../../../escaped' is not a folder name")):
        export_partition(root, "eddy", ID, "w", cut)
    assert not list(tmp_path.glob("**/escaped*"))


@pytest.mark.parametrize(
    "marker",
    [b"{broken", b'{"stopped_ms": 1}', b'{"savepoint_id": "../../x", "stopped_ms": 1}'],
)
def test_a_broken_stop_marker_keeps_the_app_stopped_and_says_why(marker: bytes, home: Path) -> None:
    settings = settings_of(home)
    mark_stopped(settings, ID, 1)
    with pytest.raises(ConfigError, match=f"with --from-savepoint {ID}"):
        check_not_stopped(settings)
    (home / "savepoints" / "eddy" / "_stopped.json").write_bytes(marker)
    with pytest.raises(ConfigError, match=r"_stopped\.json is broken \(") as refused:
        check_not_stopped(settings)
    assert "--from-savepoint ../../x" not in str(refused.value)


async def test_a_restore_is_refused_before_anything_is_written_when_a_file_is_missing(
    home: Path,
) -> None:
    """Refused before Kafka is asked anything: no broker runs here."""
    settings = settings_of(home).model_copy(update={"bootstrap_servers": "127.0.0.1:1"})
    root, manifest, gone = without_a_file(home, settings)
    stages = examples.app.build(settings, ["sensor_averages"], TEST_AGENT_SETTINGS).stages
    with pytest.raises(BrokenSnapshotError, match=re.escape(f"lists {gone}, which is not there")):
        await restore(settings, stages, root, manifest, allow_non_restored_state=True)


def without_a_file(home: Path, settings: Settings) -> tuple[SnapshotRoot, dict[str, Any], str]:
    """A savepoint whose manifest lists a results file that is gone (and that file)."""
    publish(home, "savepoint")
    root, manifest = catalog.locate(settings, "savepoint", ID)
    (gone,) = [f for f in root.files(manifest, "sensor_averages", "results") if "=1/" in f]
    Path(gone).unlink()
    return root, manifest, gone


def test_a_corrupt_data_file_is_refused_naming_it(home: Path) -> None:
    publish(home, "savepoint")
    root = SnapshotRoot.open(str(home / "savepoints"), "savepoint")
    (file,) = [
        f for f in root.files(root.manifest("eddy", ID), "sensor_averages", "results") if "=0/" in f
    ]
    Path(file).write_bytes(b"PAR1 not parquet at all")
    with pytest.raises(BrokenSnapshotError, match=re.escape(f"savepoint file {file} cannot be")):
        _saved_rows(root, file, "results")


# -- the Spark jobs: the same checks, before a Spark session starts ------------------------


def test_the_spark_jobs_read_no_broken_or_hostile_snapshot(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eddy.spark_jobs import common, sensor_report, snapshot_diff

    publish(home, "snapshot")
    newer = publish(home, "snapshot", OTHER)
    rewrite(newer, lambda m: m.update({"app_id": "../victim"}))
    root = str(home / "snapshots")
    assert common.Snapshot.open(root, "eddy").snapshot_id == ID  # the newest sound one
    for argv, start in [
        (["--snapshot", OTHER], f"eddy: snapshot {OTHER} of eddy is broken"),
        (["--snapshot", f"../victim/{ID}"], "eddy: snapshot ids look like"),
        (["--app", "../victim"], "eddy: app id '../victim' is not a folder name"),
    ]:
        assert common.run(sensor_report.main, ["--root", root, *argv]) == 2
        one_line_error(capsys, start)
    diff = ["--root", root, "--snapshot", ID, "--from", f"../{ID}"]
    assert common.run(snapshot_diff.main, diff) == 2
    one_line_error(capsys, "eddy: snapshot ids look like")
