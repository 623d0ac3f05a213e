"""``DELETE /snapshots/{id}`` and ``DELETE /savepoints/{id}`` through a real worker's
API (uvicorn) on a real broker: a manifest that names a place outside the root (as
its app or its id, relative or absolute), or lacks a field, is listed apart as
broken and refused with a 409 problem, which the OpenAPI schema declares; files
outside the root survive. And the same refusal on a real S3-compatible server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from eddy.settings import Settings
from eddy.snapshot import catalog
from eddy.snapshot.layout import MANIFEST, BrokenSnapshotError, OutsideRootError, SnapshotRoot
from eddy.topics import TopicSpec, ensure_topics
from eddy.worker import Worker
from tests.support.kafka import readings_topic, unique_settings
from tests.support.s3 import s3_filesystem, s3_server  # noqa: F401 (fixture)
from tests.unit.test_snapshot_export import publish_two_partitions
from tools.s3 import LocalS3

pytestmark = pytest.mark.integration

GOOD = "20300101T000000000Z"
PROBLEM = "application/problem+json"


def hostile(victim: Path) -> dict[str, Callable[[dict[str, Any]], None]]:
    """Changes to a manifest, each under the id of the snapshot it is made to."""

    def set_field(field: str, value: str) -> Callable[[dict[str, Any]], None]:
        return lambda manifest: manifest.update({field: value})

    return {
        "20300101T000100000Z": set_field("app_id", "../victim"),
        "20300101T000200000Z": set_field("app_id", str(victim)),
        "20300101T000300000Z": set_field("snapshot_id", f"../../victim/{GOOD}"),
        "20300101T000400000Z": set_field("snapshot_id", str(victim / GOOD)),
        "20300101T000500000Z": lambda manifest: manifest.pop("rows"),
    }


def publish(settings: Settings, kind: str, tmp_path: Path) -> dict[str, Path]:
    """A sound one and the hostile ones under the kind's root; their folders by id."""
    root_uri = settings.savepoint_root if kind == "savepoint" else settings.snapshot_root
    root = SnapshotRoot.open(root_uri, kind)
    folders = {}
    for found_id, change in {GOOD: None, **hostile(tmp_path / "victim")}.items():
        publish_two_partitions(root, settings.app_id, found_id, tmp_path / "scratch", kind=kind)
        folder = Path(root_uri) / settings.app_id / found_id
        if change is not None:
            manifest = orjson.loads((folder / MANIFEST).read_bytes())
            change(manifest)
            (folder / MANIFEST).write_bytes(orjson.dumps(manifest))
        folders[found_id] = folder
    return folders


async def test_delete_over_rest_refuses_every_broken_or_hostile_manifest(tmp_path: Path) -> None:
    settings = unique_settings(tmp_path, snapshot_root=str(tmp_path / "snapshots"))
    await ensure_topics(settings, [TopicSpec(readings_topic(settings), 1)])
    keep = tmp_path / "victim" / GOOD / "keep.txt"
    keep.parent.mkdir(parents=True)
    keep.write_text("precious")
    folders = {kind: publish(settings, kind, tmp_path) for kind in ("snapshot", "savepoint")}
    hostile_ids = sorted(hostile(tmp_path / "victim"))

    worker = Worker(settings)
    await worker.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.api_port}") as client:
            schema = (await client.get("/openapi.json")).json()
            for kind, found in folders.items():
                listing = (await client.get(f"/{kind}s")).json()
                assert [s["id"] for s in listing["items"]] == [GOOD]
                assert [b["id"] for b in listing["broken"]] == hostile_ids
                reasons = {b["id"]: b["reason"] for b in listing["broken"]}
                assert "app_id: app id '../victim' is not a folder name" in reasons[hostile_ids[0]]
                assert reasons[hostile_ids[4]] == "_manifest.json: rows: missing"

                for found_id in hostile_ids:
                    for method in ("DELETE", "GET"):
                        refused = await client.request(method, f"/{kind}s/{found_id}")
                        assert refused.status_code == 409, (method, found_id, refused.text)
                        assert refused.headers["content-type"] == PROBLEM
                        body = refused.json()
                        assert (body["status"], body["title"]) == (409, "Conflict")
                        assert body["detail"].startswith(
                            f"{kind} {found_id} of {settings.app_id} is broken, so it is "
                            "neither read nor deleted: "
                        )
                    assert (found[found_id] / MANIFEST).is_file()  # refused, not deleted
                assert keep.read_text() == "precious"

                disposed = await client.delete(f"/{kind}s/{GOOD}")
                assert disposed.status_code == 200
                assert disposed.json() == {"id": GOOD, "location": str(found[GOOD])}
                assert not found[GOOD].exists()

                declared = schema["paths"][f"/{kind}s/{{found_id}}"]["delete"]["responses"]
                problem = declared["409"]["content"][PROBLEM]["schema"]
                assert problem == {"$ref": "#/components/schemas/Problem"}
    finally:
        await worker.stop()
    assert keep.read_text() == "precious"


def test_an_s3_root_refuses_a_manifest_naming_another_prefix(
    s3_server: LocalS3,  # noqa: F811 (the fixture)
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    settings = unique_settings(tmp_path, snapshot_root=s3_server.uri(f"{tmp_path.name}/root"))
    root = catalog.open_root(settings, "snapshot")
    publish_two_partitions(root, settings.app_id, GOOD, tmp_path / "scratch")
    fs = s3_filesystem(s3_server)
    victim = f"{s3_server.bucket}/{tmp_path.name}/victim/{GOOD}/keep.txt"
    with fs.open_output_stream(victim) as out:
        out.write(b"precious")
    manifest_key = f"{root.snapshot_dir(settings.app_id, GOOD)}/{MANIFEST}"
    manifest = root.read_manifest(settings.app_id, GOOD)
    manifest["app_id"] = "../../victim"
    root.write_json(manifest_key, manifest)

    with pytest.raises(BrokenSnapshotError, match=r"app_id: app id '../../victim' is not a"):
        catalog.dispose(settings, "snapshot", GOOD)
    (broken,) = [s for s in catalog.listing(settings, "snapshot") if s["broken"]]
    assert broken["id"] == GOOD
    with pytest.raises(OutsideRootError, match="is not a key under the snapshot root"):
        root.delete_dir(f"{root.base}/../victim")
    with fs.open_input_stream(victim) as stream:
        assert stream.read() == b"precious"
    assert root.exists(manifest_key)
