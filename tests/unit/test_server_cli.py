"""``python -m tools kafka|postgres|registry`` as a user and a script meet them:
an action exits 0 once done, ``status``'s headline says whose server answers,
``--json`` prints one object, and status exits 0 only when the server is up."""

from __future__ import annotations

import argparse
import io
import json

import pytest
from rich.console import Console

from tools.server_cli import Headline, print_status, run_action

HEADLINE = Headline(not_ready="not answering yet", other="not running (another answers)")


@pytest.mark.parametrize(
    ("running", "ready", "other_answers", "shown"),
    [
        (True, True, False, "running"),
        (True, False, False, "running (not answering yet)"),
        (False, False, True, "not running (another answers)"),
        (False, False, False, "not running"),
    ],
)
def test_the_headline_says_whose_server_answers(
    running: bool, ready: bool, other_answers: bool, shown: str
) -> None:
    assert HEADLINE.of(running, ready, other_answers) == shown


def test_the_table_pads_names_and_exits_1_when_down() -> None:
    out = io.StringIO()
    rows = [("Kafka", "not running"), ("pid", "-")]
    code = print_status(Console(file=out), up=False, as_json=False, fields={}, rows=rows, width=10)
    assert out.getvalue() == "Kafka      not running\npid        -\n"
    assert code == 1


def test_json_prints_the_fields_in_order_and_exits_0_when_up(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fields: dict[str, object] = {"running": True, "pid": 42}
    code = print_status(
        Console(file=io.StringIO()), up=True, as_json=True, fields=fields, rows=[], width=10
    )
    printed = capsys.readouterr().out
    assert list(json.loads(printed)) == ["running", "pid"]
    assert code == 0


class Server:
    """A local server's module, as the CLI sees it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def ensure_running(self, console: Console | None = None) -> bool:
        self.calls.append("start")
        return True  # it started: not an exit code

    def stop(self, console: Console | None = None) -> bool:
        self.calls.append("stop")
        return True


def act(server: Server, action: str, **options: object) -> int:
    args = argparse.Namespace(action=action, **options)
    return run_action("kafka", args, server, lambda _c, as_json: 3 if as_json else 1, OTHERS)


OTHERS = {"fetch": lambda console: console.print("fetched")}


def test_an_action_exits_0_whatever_it_returns() -> None:
    server = Server()
    assert act(server, "start") == 0
    assert act(server, "stop") == 0
    assert act(server, "fetch") == 0
    assert server.calls == ["start", "stop"]


def test_status_exits_with_its_own_code_and_sees_json() -> None:
    assert act(Server(), "status") == 1
    assert act(Server(), "status", json=True) == 3


def test_an_unknown_action_is_a_bug_not_an_exit_code() -> None:
    with pytest.raises(ValueError, match="unknown kafka action 'restart'"):
        act(Server(), "restart")
