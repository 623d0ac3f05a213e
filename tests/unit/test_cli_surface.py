"""The command lines as a user meets them: ``eddy``, ``python -m tools`` and
``python -m eddy.spark_jobs`` (and each job alone) name themselves as they are typed,
say what every subcommand and choice does, print JSON on request for everything
that lists, and print each error as one line without a traceback."""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from importlib import import_module, metadata
from pathlib import Path
from typing import Any

import httpx
import pytest

import eddy as eddy_package
from eddy.cli import build_parser as eddy_parser
from eddy.cli import main as eddy
from eddy.snapshot.layout import SnapshotRoot
from eddy.spark_jobs import JOBS
from tests.support.user_apps import write_package
from tests.unit.test_snapshot_export import assert_summarises_two_partitions, publish_two_partitions
from tools import localkafka, postgres
from tools.cli import build_parser as tools_parser
from tools.cli import main as tools

ROOT = Path(__file__).resolve().parents[2]


def spark_parser() -> argparse.ArgumentParser:
    return import_module("eddy.spark_jobs.__main__").build_parser()  # type: ignore[no-any-return]


def job_parser(name: str) -> Callable[[], argparse.ArgumentParser]:
    return lambda: import_module(f"eddy.spark_jobs.{name}").build_parser()  # type: ignore[no-any-return]


# Each command line, as a user types it, and the function its module builds it with.
COMMAND_LINES: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "eddy": eddy_parser,
    "python -m tools": tools_parser,
    "python -m eddy.spark_jobs": spark_parser,
    **{f"python -m eddy.spark_jobs.{name}": job_parser(name) for name in JOBS},
}


def walk(
    parser: argparse.ArgumentParser, invocation: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``parser`` and every subcommand's parser under it, each with the command
    line that reaches it (``eddy snapshot list``)."""
    yield invocation, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from walk(child, f"{invocation} {name}")


def subcommand_help(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    """What ``--help`` shows for each subcommand of ``parser`` (none: {})."""
    shown: dict[str, str | None] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {a.dest: a.help for a in action._get_subactions()}
            shown |= {name: listed.get(name) for name in action.choices}
    return shown


def everything() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for invocation, build in COMMAND_LINES.items():
        yield from walk(build(), invocation)


def test_every_command_is_named_as_it_is_typed() -> None:
    for typed, parser in everything():
        assert parser.prog == typed
        assert parser.format_usage().startswith(f"usage: {typed} ")
        assert "__main__" not in parser.prog
        assert ".py" not in parser.prog


def test_every_subcommand_choice_and_option_says_what_it_does() -> None:
    for typed, parser in everything():
        for name, shown in subcommand_help(parser).items():
            assert (shown or "").strip(), f"{typed} {name}: no help"
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
                continue
            what = f"{typed} {'/'.join(action.option_strings) or action.dest}"
            said = action.help or ""
            assert said.strip(), f"{what}: no help"
            for choice in action.choices or ():  # a value, not a verb: its help says each
                assert str(choice) in said, f"{what}: help does not say what {choice} is"


def test_every_parser_in_the_repository_is_given_its_prog() -> None:
    """A parser made without ``prog`` names itself after its file: ``usage:
    __main__.py``. (The walk above covers the CLIs; this covers bench/ too.)"""
    unnamed = []
    for folder in ("service", "tools", "spark_jobs", "bench", "api", "agents", "tables"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "attr", getattr(node.func, "id", None))
                    == "ArgumentParser"
                    and not any(k.arg == "prog" for k in node.keywords)
                ):
                    unnamed.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert unnamed == []


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No EDDY_* variable but the snapshot and savepoint roots, in ``tmp_path``."""
    for name in list(os.environ):
        if name.startswith("EDDY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("EDDY_SNAPSHOT_ROOT", str(tmp_path / "snapshots"))
    monkeypatch.setenv("EDDY_SAVEPOINT_ROOT", str(tmp_path / "savepoints"))
    return tmp_path


def one_json_document(capsys: pytest.CaptureFixture[str]) -> Any:
    out = capsys.readouterr().out
    return json.loads(out)


# Every eddy command that lists, and the JSON document it prints.
LISTINGS: list[tuple[list[str], type]] = [
    (["agents"], list),
    (["topics", "list"], list),
    (["config"], dict),
    (["snapshot", "list"], list),
    (["savepoint", "list"], list),
]


def test_every_eddy_listing_prints_json_on_request_and_text_by_default(
    monkeypatch: pytest.MonkeyPatch, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, shape in LISTINGS:
        assert eddy(argv) == 0, argv
        text = capsys.readouterr().out
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)
        assert eddy([*argv, "--json"]) == 0, argv
        assert isinstance(one_json_document(capsys), shape), argv

    # status asks a worker: --json is taken, and no worker is one line, not a traceback.
    def refused(url: str, **_: Any) -> httpx.Response:
        raise httpx.ConnectError("Connection refused")

    assert eddy_parser().parse_args(["status", "--json"]).json is True
    monkeypatch.setattr(httpx, "get", refused)
    assert eddy(["status", "--json", "--url", "http://127.0.0.1:9"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert_one_line_error(captured.err, "eddy: no worker answered at http://127.0.0.1:9")


def test_config_json_lists_each_variable_with_its_value_and_who_reads_it(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert eddy(["config", "--json"]) == 0
    found = one_json_document(capsys)
    assert set(found) == {"settings", "errors"}
    rows = {row["variable"]: row for row in found["settings"]}
    assert rows["EDDY_SNAPSHOT_ROOT"] == {
        "variable": "EDDY_SNAPSHOT_ROOT",
        "value": str(clean_env / "snapshots"),
        "declared_by": "eddy",
    }
    assert any(row["declared_by"] != "eddy" for row in found["settings"])  # agents' too
    assert all(set(row) == {"variable", "value", "declared_by"} for row in found["settings"])


KAFKA = localkafka.BrokerStatus(
    running=False,
    ready=False,
    pid=None,
    version="3.9.2",
    bootstrap="127.0.0.1:9092",
    data_dir=Path("/data/kafka"),
    external=True,
)
POSTGRES = postgres.ServerStatus(
    running=True,
    ready=True,
    pid=42,
    dsn="postgresql://eddy@127.0.0.1:5433/eddy",
    data_dir=Path("/data/pg"),
    log=Path("/data/pg.log"),
    external=False,
)


@pytest.mark.parametrize(
    ("server", "module", "state", "code"),
    [("kafka", localkafka, KAFKA, 1), ("postgres", postgres, POSTGRES, 0)],
)
def test_the_local_servers_status_prints_json_on_request(
    server: str,
    module: Any,
    state: Any,
    code: int,
    monkeypatch: pytest.MonkeyPatch,
    clean_env: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(module, "status", lambda: state)
    assert tools([server, "status"]) == code  # exit 1: not running, for scripts
    with pytest.raises(json.JSONDecodeError):
        json.loads(capsys.readouterr().out)
    assert tools([server, "status", "--json"]) == code
    found = one_json_document(capsys)
    assert (found["running"], found["pid"], found["data_dir"]) == (
        state.running,
        state.pid,
        str(state.data_dir),
    )


def assert_one_line_error(err: str, start: str) -> None:
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(start), err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("run", "argv", "start"),
    [
        (eddy, [], "eddy: the following arguments are required: command (see eddy --help)"),
        (eddy, ["topics"], "eddy: the following arguments are required: action (see eddy topics"),
        (eddy, ["snapshot", "show"], "eddy: the following arguments are required: id"),
        (eddy, ["nope"], "eddy: argument command: invalid choice: 'nope'"),
        (eddy, ["config", "--json", "--markdown"], "eddy: argument --markdown: not allowed"),
        (tools, ["kafka"], "tools: the following arguments are required: action"),
        (tools, ["kafka", "begin"], "tools: argument action: invalid choice: 'begin'"),
        (tools, ["rooms", "--port", "99999"], "tools: argument --port: 99999 is not in"),
        (lambda argv: spark_parser().parse_args(argv), ["--bogus"], "eddy: unrecognized"),
    ],
)
def test_a_usage_error_is_one_line_naming_the_help_to_read(
    run: Callable[[list[str]], object],
    argv: list[str],
    start: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        run(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, start)
    assert "--help)" in err


def test_errors_are_one_line_even_when_the_message_is_not(
    monkeypatch: pytest.MonkeyPatch, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EDDY_PARTITIONS", "many")
    monkeypatch.setenv("EDDY_COMMIT_INTERVAL_MS", "often")
    assert eddy(["config"]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "eddy: invalid configuration: EDDY_")
    assert "EDDY_PARTITIONS" in err
    assert "EDDY_COMMIT_INTERVAL_MS" in err


def test_a_refused_path_is_one_line(
    monkeypatch: pytest.MonkeyPatch, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def refused(*_: Any) -> list[dict[str, Any]]:
        raise PermissionError(13, "Permission denied", "/data/snapshots/eddy")

    monkeypatch.setattr("eddy.snapshot.catalog.listing", refused)
    assert eddy(["snapshot", "list"]) == 2
    assert_one_line_error(capsys.readouterr().err, "eddy: [Errno 13] Permission denied")


def test_the_tools_name_themselves_in_their_errors(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tools(["simulate", "--scenario", "bogus"]) == 2
    assert_one_line_error(capsys.readouterr().err, "tools: simulator: unknown scenario 'bogus'")


def test_eddy_agents_says_which_agents_run_and_what_each_serves(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert eddy(["agents", "--json"]) == 0
    rows = {row["agent"]: row for row in one_json_document(capsys)}
    assert rows["hashtag_counts"]["stages"] == ["hashtag_counts.repartition", "hashtag_counts"]
    assert rows["sensor_averages"]["paths"] == ["/agents/sensor_averages/windows/{key}"]
    assert rows["postgres_sink"] == {
        "agent": "postgres_sink",
        "default": False,
        "runs": False,
        "settings": "SinkSettings",
        "stages": [],
        "topics": [],
        "paths": [],
    }


def test_eddy_send_refuses_what_the_app_would_dead_letter_before_touching_kafka(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # No broker answers here: each refusal must come before any connection.
    monkeypatch.setenv("EDDY_BOOTSTRAP_SERVERS", "127.0.0.1:9")
    assert eddy(["send", "clicks", "{}"]) == 2
    assert_one_line_error(capsys.readouterr().err, "eddy: send: the app has no topic 'clicks'")
    assert eddy(["send", "sensor-readings", '{"sensor_id": "s1"}']) == 2
    assert_one_line_error(
        capsys.readouterr().err, "eddy: send: not a value of topic 'sensor-readings': "
    )
    assert eddy(["send", "sensor-readings", "{not json"]) == 2
    assert_one_line_error(capsys.readouterr().err, "eddy: send: not a value of topic")


def test_eddy_send_keys_a_record_by_the_topics_key_field() -> None:
    from eddy.examples.topics import READINGS
    from eddy.send import encoded

    key, value = encoded(
        READINGS, '{"sensor_id": "s7", "timestamp_ms": 5, "temperature": 70.5}', None
    )
    assert key == b"s7"
    assert json.loads(value) == {"sensor_id": "s7", "timestamp_ms": 5, "temperature": 70.5}
    assert encoded(READINGS, value.decode(), "other")[0] == b"other"


def test_eddy_config_never_prints_a_secret(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EDDY_API_TOKEN", "token-1234")
    monkeypatch.setenv("EDDY_POSTGRES_DSN", "postgresql://eddy:pw-5678@db/eddy")
    for argv in (["config"], ["config", "--json"]):
        assert eddy(argv) == 0
        out = capsys.readouterr().out
        assert "EDDY_API_TOKEN" in out
        assert "token-1234" not in out
        assert "pw-5678" not in out


def test_the_app_is_named_before_or_after_the_command(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert eddy_parser().parse_args(["--app", "a:b", "topics", "list"]).app == "a:b"
    assert eddy_parser().parse_args(["topics", "list", "--app", "a:b"]).app == "a:b"
    assert eddy_parser().parse_args(["topics", "list"]).app is None
    assert eddy(["--app", "nowhere_at_all:app", "agents"]) == 2
    assert_one_line_error(capsys.readouterr().err, "eddy: --app nowhere_at_all:app: no module")


# --- snapshot and savepoint show/dispose, on ones published in tmp_path (no Kafka) ---------

OLDER, NEWER = "20300101T000000000Z", "20300101T000100000Z"


def publish(clean_env: Path, kind: str, *ids: str, app_id: str = "eddy") -> Path:
    """Publish complete ones of ``app_id`` under the root EDDY_<KIND>_ROOT names;
    returns the app's folder there."""
    root = SnapshotRoot.open(str(clean_env / f"{kind}s"))
    for found_id in ids:
        publish_two_partitions(root, app_id, found_id, clean_env / "scratch", kind=kind)
    return clean_env / f"{kind}s" / app_id


def listed_ids(kind: str, capsys: pytest.CaptureFixture[str], *app: str) -> list[str]:
    assert eddy([kind, "list", "--json", *app]) == 0
    return [found["id"] for found in one_json_document(capsys)]


@pytest.mark.parametrize("kind", ["snapshot", "savepoint"])
def test_show_prints_the_stages_tables_offsets_and_watermarks_of_one(
    kind: str, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = publish(clean_env, kind, OLDER) / OLDER
    assert eddy([kind, "show", OLDER]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{kind} {OLDER} of eddy, 2030-01-01 00:00:00 UTC, 33 rows at {where}"
    assert "  sensor_averages: 2 partitions, 33 rows" in lines
    assert "    results: 12 rows, schema version 1" in lines
    assert "    partition 0: offsets {'sensor-readings': 10}" in lines
    assert "    partition 1: offsets {'sensor-readings': 11}" in lines

    assert eddy([kind, "show", OLDER, "--json"]) == 0
    shown = one_json_document(capsys)
    assert (shown["id"], shown["app_id"], shown["rows"], shown["location"]) == (
        OLDER,
        "eddy",
        33,
        str(where),
    )
    assert shown["created_ms"] == 1_893_456_000_000  # the id's time
    assert_summarises_two_partitions(shown)
    assert eddy([kind, "show", f"eddy/{OLDER}", "--json"]) == 0  # <app>/<id>: the same one
    assert one_json_document(capsys) == shown


@pytest.mark.parametrize("kind", ["snapshot", "savepoint"])
def test_dispose_deletes_one_so_list_no_longer_shows_it_and_show_fails_in_one_line(
    kind: str, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = publish(clean_env, kind, OLDER, NEWER)
    assert listed_ids(kind, capsys) == [OLDER, NEWER]

    assert eddy([kind, "dispose", OLDER]) == 0
    assert capsys.readouterr().out == f"disposed of {kind} {OLDER} at {folder / OLDER}\n"
    assert not (folder / OLDER).exists()
    assert (folder / NEWER).is_dir()
    assert listed_ids(kind, capsys) == [NEWER]
    assert eddy([kind, "list"]) == 0
    assert OLDER not in capsys.readouterr().out

    for argv in ([kind, "show", OLDER], [kind, "show", OLDER, "--json"], [kind, "dispose", OLDER]):
        assert eddy(argv) == 2, argv
        captured = capsys.readouterr()
        assert captured.out == ""
        assert_one_line_error(captured.err, f"eddy: no complete {kind} ")
        assert OLDER in captured.err
        assert f"eddy {kind} list" in captured.err  # what to run to see the ones there are

    assert eddy([kind, "dispose", NEWER, "--json"]) == 0
    assert one_json_document(capsys) == {"id": NEWER, "location": str(folder / NEWER)}
    assert listed_ids(kind, capsys) == []
    assert eddy([kind, "list"]) == 0
    assert capsys.readouterr().out.startswith(f"no complete {kind} of eddy under ")


def test_version_is_eddy_and_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    installed = metadata.version("eddy")
    assert eddy_package.__version__ == installed
    expected = f"eddy {installed}\n"
    (script,) = metadata.entry_points(group="console_scripts", name="eddy")
    assert script.load() is eddy  # what the installed `eddy` runs
    with pytest.raises(SystemExit) as exited:
        eddy(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == expected
    done = subprocess.run(
        [sys.executable, "-m", "eddy", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")


# --- --app and EDDY_APP: the user's own app (tests/support/user_apps.py) --------------

USER_APP = "clickstream.app:app"  # App("clickstream"): its app id, and its one agent


@pytest.fixture
def user_app(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The user's package on the import path, as if run from its folder."""
    monkeypatch.syspath_prepend(str(write_package(clean_env / "user")))
    yield USER_APP
    for name in [m for m in sys.modules if m.startswith("clickstream")]:
        del sys.modules[name]


def test_snapshot_savepoint_and_status_work_on_the_app_that_app_names(
    user_app: str,
    clean_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def refused(url: str, **_: Any) -> httpx.Response:
        raise httpx.ConnectError("Connection refused")

    # status loads the app (its settings, token and API address) before asking a worker.
    monkeypatch.setattr(httpx, "get", refused)
    assert eddy(["status", "--app", "nowhere_at_all:app"]) == 2
    assert_one_line_error(capsys.readouterr().err, "eddy: --app nowhere_at_all:app: no module")
    assert "clickstream.app" not in sys.modules
    assert eddy(["status", "--app", user_app, "--url", "http://127.0.0.1:9"]) == 2
    assert "clickstream.app" in sys.modules
    assert_one_line_error(capsys.readouterr().err, "eddy: no worker answered at http://127.0.0.1:9")

    # The app's name is its app id: the snapshots and savepoints listed are its own.
    for kind in ("snapshot", "savepoint"):
        publish(clean_env, kind, OLDER, app_id="clickstream")
        assert listed_ids(kind, capsys) == []  # the default app's: none
        assert listed_ids(kind, capsys, "--app", user_app) == [OLDER]
        assert eddy(["--app", user_app, kind, "list", "--json"]) == 0  # before the command
        assert [s["app_id"] for s in one_json_document(capsys)] == ["clickstream"]
        assert eddy([kind, "dispose", OLDER, "--app", user_app]) == 0
        assert capsys.readouterr().out.startswith(f"disposed of {kind} {OLDER} at ")
        assert listed_ids(kind, capsys, "--app", user_app) == []


def test_eddy_app_in_the_environment_selects_the_app_as_app_does(
    user_app: str,
    clean_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert eddy(["agents", "--json"]) == 0
    assert "sensor_averages" in {row["agent"] for row in one_json_document(capsys)}
    assert eddy(["agents", "--json", "--app", user_app]) == 0
    by_option = one_json_document(capsys)
    assert [row["agent"] for row in by_option] == ["clicks_per_minute"]

    monkeypatch.setenv("EDDY_APP", user_app)
    assert eddy(["agents", "--json"]) == 0
    assert one_json_document(capsys) == by_option
    publish(clean_env, "snapshot", OLDER, app_id="clickstream")
    assert listed_ids("snapshot", capsys) == [OLDER]
    monkeypatch.setenv("EDDY_APP", "nowhere_at_all:app")
    assert eddy(["agents"]) == 2
    assert_one_line_error(capsys.readouterr().err, "eddy: --app nowhere_at_all:app: no module")
