"""The command lines as a user meets them: ``eddy``, ``python -m tools`` and
``python -m spark_jobs`` (and each job alone) name themselves as they are typed,
say what every subcommand and choice does, print JSON on request for everything
that lists, and print each error as one line without a traceback."""

from __future__ import annotations

import argparse
import ast
import json
import os
from collections.abc import Callable, Iterator
from importlib import import_module
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.cli import build_parser as eddy_parser
from service.cli import main as eddy
from spark_jobs import JOBS
from tools import localkafka, postgres
from tools.cli import build_parser as tools_parser
from tools.cli import main as tools

ROOT = Path(__file__).resolve().parents[2]


def spark_parser() -> argparse.ArgumentParser:
    return import_module("spark_jobs.__main__").build_parser()  # type: ignore[no-any-return]


def job_parser(name: str) -> Callable[[], argparse.ArgumentParser]:
    return lambda: import_module(f"spark_jobs.{name}").build_parser()  # type: ignore[no-any-return]


# Each command line, as a user types it, and the function its module builds it with.
COMMAND_LINES: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "eddy": eddy_parser,
    "python -m tools": tools_parser,
    "python -m spark_jobs": spark_parser,
    **{f"python -m spark_jobs.{name}": job_parser(name) for name in JOBS},
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

    monkeypatch.setattr("service.snapshot.catalog.listing", refused)
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
    from agents.topics import READINGS
    from service.send import encoded

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
