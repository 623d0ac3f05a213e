"""The PostgreSQL sink without a database: rows, in-batch dedupe, the SQL it sends,
dead letters, and the local server's binary lookup (writes to a real PostgreSQL
are in tests/integration/test_postgres.py)."""

from __future__ import annotations

import pwd
from pathlib import Path
from typing import Literal

import orjson
import pytest

from eddy import examples
from eddy.examples.postgres_sink import (
    SENSOR_SINK,
    TABLES,
    WINDOW_AVERAGES,
    WindowAverage,
    upsert_to,
)
from eddy.pipeline.markers import UPSTREAM, UPSTREAMS, WATERMARK
from eddy.pipeline.pgmigrate import lock_key
from eddy.pipeline.pgsink import PostgresSink, SinkLogic
from eddy.pipeline.source import Source
from eddy.settings import Settings, build
from tests.support.fakes import CollectingOutput, FakeRecord
from tools.postgres import server

WINDOWS, LATEST = TABLES


def average(
    sensor: str, start_ms: int, count: int = 5, timing: Literal["first", "update"] = "first"
) -> WindowAverage:
    return WindowAverage(
        sensor_id=sensor,
        window_start_ms=start_ms,
        window_end_ms=start_ms + 5_000,
        count=count,
        avg=70.0 + count,
        min=68.0,
        max=72.5,
        timing=timing,
    )


def encoded(value: WindowAverage) -> bytes:
    return orjson.dumps(value.model_dump())


def sink(max_batch_rows: int = 100) -> PostgresSink:
    target = upsert_to(
        "postgresql://eddy:secret@127.0.0.1:1/eddy", "eddy", max_batch_rows=max_batch_rows
    )
    return PostgresSink("postgres_sink", Source("averages", WINDOW_AVERAGES.codec), target)


def test_a_row_holds_the_fields_in_column_order() -> None:
    row = WINDOWS.row(average("sensor_1", 1_000))
    assert row == ("sensor_1", 1_000, 6_000, 5, 75.0, 68.0, 72.5, "first")


def test_the_window_table_keeps_one_row_per_window_the_latest_version() -> None:
    values = [
        average("sensor_2", 0),
        average("sensor_1", 5_000),
        average("sensor_1", 5_000, count=7, timing="update"),
        average("sensor_1", 0),
        average("sensor_1", 5_000, count=6, timing="update"),  # a stale version, replayed
        average("sensor_1", 5_000, count=7, timing="update"),  # the same row again
    ]
    rows = WINDOWS.dedupe(values)
    assert [(r[0], r[1], r[3]) for r in rows] == [
        ("sensor_1", 0, 5),
        ("sensor_1", 5_000, 7),
        ("sensor_2", 0, 5),
    ]


def test_without_a_version_the_last_row_of_a_key_wins() -> None:
    plain = type(WINDOWS)(WINDOWS.table, WINDOWS.columns, WINDOWS.key)
    rows = plain.dedupe([average("s", 0, count=9), average("s", 0, count=3)])
    assert [r[3] for r in rows] == [3]


def test_latest_keeps_the_greatest_window_whatever_the_order() -> None:
    values = [
        average("sensor_1", 10_000),
        average("sensor_1", 5_000, count=8, timing="update"),  # a late update, older window
        average("sensor_2", 0),
        average("sensor_1", 10_000, count=6, timing="update"),
    ]
    forward = LATEST.dedupe(values)
    assert LATEST.dedupe(list(reversed(values))) == forward
    assert [(r[0], r[1], r[3]) for r in forward] == [("sensor_1", 10_000, 6), ("sensor_2", 0, 5)]


def test_the_upserts_compare_versions_as_the_dedupe_does() -> None:
    assert WINDOWS.statement("eddy") == (
        'INSERT INTO "eddy"."sensor_window_averages" AS t ("sensor_id", "window_start_ms", '
        '"window_end_ms", "count", "avg", "min", "max", "timing") VALUES ($1, $2, $3, $4, $5, '
        '$6, $7, $8) ON CONFLICT ("sensor_id", "window_start_ms") DO UPDATE SET '
        '"sensor_id" = excluded."sensor_id", "window_start_ms" = excluded."window_start_ms", '
        '"window_end_ms" = excluded."window_end_ms", "count" = excluded."count", '
        '"avg" = excluded."avg", "min" = excluded."min", "max" = excluded."max", '
        '"timing" = excluded."timing" WHERE (excluded."count") >= (t."count")'
    )
    assert LATEST.statement("s1").endswith(
        'WHERE (excluded."window_start_ms", excluded."count") >= (t."window_start_ms", t."count")'
    )


async def test_records_are_buffered_and_bad_ones_dead_lettered() -> None:
    logic = SinkLogic(sink())
    out = CollectingOutput()
    good = average("sensor_1", 0)
    records = [
        FakeRecord(0, encoded(good)),
        FakeRecord(1, b"{not json"),
        FakeRecord(2, None),
        FakeRecord(3, encoded(good).replace(b'"first"', b'"late"')),
        FakeRecord(4, orjson.dumps({**good.model_dump(), "count": "5"})),
        FakeRecord(5, encoded(average("sensor_2", 0))),
    ]
    for record in records:
        await logic.process_async(record, out)
    assert logic.buffered == 2
    assert out.dead[0].startswith("malformed JSON")
    assert out.dead[1] == "empty value (tombstone)"
    assert out.dead[2].startswith("timing:")
    assert out.dead[3].startswith("count:")
    assert out.events == {}  # nothing written yet
    logic.cancel()
    assert logic.buffered == 0
    await logic.flush(out)  # an empty buffer needs no database
    assert out.events == {}


async def test_watermark_markers_are_skipped() -> None:
    logic = SinkLogic(sink())
    marker = FakeRecord(0, None, headers=((WATERMARK, b"5"), (UPSTREAM, b"0"), (UPSTREAMS, b"1")))
    out = CollectingOutput()
    await logic.process_async(marker, out)
    assert (logic.buffered, out.dead) == (0, [])


def test_the_agent_reads_the_averages_and_hides_the_password() -> None:
    settings = build(Settings, {"topic_prefix": "x-"})
    sink_settings = {
        "postgres_dsn": "postgresql://eddy:hunter2@db:5432/eddy",
        "postgres_schema": "sink",
        "sink_max_batch_rows": 10,
    }
    built = examples.app.build(settings, ["postgres_sink"], {"SinkSettings": sink_settings})
    (stage,) = built.stages
    assert isinstance(stage, PostgresSink)
    assert (stage.sources, stage.output_topics) == (("x-sensor-averages",), ())
    assert (stage.schema, stage.max_batch_rows) == ("sink", 10)
    assert "hunter2" not in repr(stage)


def test_migrations_are_ordered_and_locked_per_schema() -> None:
    versions = [m.version for m in SENSOR_SINK]
    assert versions == sorted(set(versions))
    assert lock_key("eddy") == lock_key("eddy") != lock_key("other")
    assert -(2**63) <= lock_key("eddy") < 2**63


def test_the_newest_installed_major_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for major, has_initdb in (("13", True), ("15", True), ("16", False)):
        (tmp_path / major / "bin").mkdir(parents=True)
        if has_initdb:
            (tmp_path / major / "bin" / "initdb").touch()
    monkeypatch.setattr(server, "_DEBIAN_ROOT", tmp_path)
    assert server.bin_dir() == tmp_path / "15" / "bin"


def test_missing_binaries_say_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "_DEBIAN_ROOT", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(server.LocalPostgresError, match=r"make postgres.*apt-get install"):
        server.bin_dir()


def test_a_directory_the_server_user_cannot_enter_is_named(tmp_path: Path) -> None:
    stranger = pwd.struct_passwd(("stranger", "x", 54_321, 54_321, "", "/", "/bin/sh"))
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(server.LocalPostgresError, match=rf"cannot enter {closed} \(mode 700\)"):
        server._check_traversable(closed, stranger)
    closed.chmod(0o701)
    server._check_traversable(closed, stranger)
