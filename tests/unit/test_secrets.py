"""No credential is shown: not in a message, a log line, a traceback, a settings
repr, ``eddy config``, a dead letter, a metric label or an API error body.
(tests/e2e/test_secrets.py checks the same through a real worker.)"""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from urllib.parse import quote, quote_plus

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import generate_latest
from pydantic import Field, SecretStr

from eddy import AgentSettings
from eddy import logs as eddy_logs
from eddy.api import errors
from eddy.cli import main as eddy
from eddy.cli_parser import print_error
from eddy.errors import ConfigError
from eddy.examples.settings import RoomSettings
from eddy.metrics import Metrics
from eddy.redact import MASK, forget_all, redact, remember, remember_in
from eddy.runtime.output import TaskOutput
from eddy.settings import Settings, load_settings
from tests.support.fakes import FakeRecord

# Everything a user may be shown of a secret: itself, URL-encoded, and in basic auth.
SCHEMES = ["http", "https", "s3", "postgresql", "gs", "abfss"]


def forms(secret: str, user: str = "") -> list[str]:
    shown = {secret, quote(secret, safe=""), quote_plus(secret)}
    if user:
        shown.add(base64.b64encode(f"{user}:{secret}".encode()).decode())
    return sorted(shown)


def assert_hidden(text: str, *secrets: str) -> None:
    for secret in secrets:
        for form in forms(secret):
            assert form not in text, f"{form!r} shown in {text!r}"


@pytest.fixture(autouse=True)
def nothing_remembered() -> Iterator[None]:
    """Each test starts with no remembered secret, and leaves none behind."""
    forget_all()
    yield
    forget_all()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in list(os.environ):
        if name.startswith("EDDY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("EDDY_HOME", str(tmp_path))
    return tmp_path


# --- redact: credentials found by their shape ------------------------------------------

# A secret: a marker no surrounding text has, then anything a password may hold.
secrets = st.builds(
    lambda body: f"Zq{body}",
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=4),
)
context = st.text(alphabet="abcdefghij .,;()[]", max_size=30)


@given(secret=secrets, scheme=st.sampled_from(SCHEMES), before=context, after=context)
def test_a_password_in_any_url_is_masked_wherever_it_is_quoted(
    secret: str, scheme: str, before: str, after: str
) -> None:
    url = f"{scheme}://user:{quote(secret, safe='')}@host.example:8081/a/b?x=1"
    shown = redact(f"{before}{url}{after}")
    assert_hidden(shown, secret)
    assert f"{scheme}://{MASK}@host.example:8081/a/b?x=1" in shown


@given(
    secret=st.from_regex(r"Zq[A-Za-z0-9/+=@:?#%!$&*-]{4,30}", fullmatch=True),
    scheme=st.sampled_from(SCHEMES),
)
def test_a_password_pasted_unencoded_is_masked_whole(secret: str, scheme: str) -> None:
    # AWS secret keys hold "/" and "+": pasted as they are, the URL is not valid,
    # and must still not show them.
    shown = redact(f"cannot open '{scheme}://AKIAEXAMPLE:{secret}@bucket/prefix': denied")
    assert_hidden(shown, secret, secret[2:])
    assert f"'{scheme}://{MASK}@" in shown


@given(secret=st.from_regex(r"Zq[A-Za-z0-9._~%+/-]{4,30}", fullmatch=True))
def test_a_credential_parameter_is_masked_in_queries_dsns_json_and_reprs(secret: str) -> None:
    for text in (
        f"s3://bucket/p?region=x&secret_key={secret}&scheme=http",
        f"s3://bucket/p?X-Amz-Signature={secret}",
        f"host=db user=eddy password={secret} dbname=eddy",
        f"host=db password='{secret}'",
        f'{{"password": "{secret}", "user": "eddy"}}',
        f"{{'api_key': '{secret}'}}",
        f"EDDY_SASL_PASSWORD={secret}",
        f'org.apache.kafka.common.security.scram.ScramLoginModule password="{secret}";',
        f"headers: {{'Authorization': 'Bearer {secret}'}}",
    ):
        assert_hidden(redact(text), secret)


def test_an_authorization_header_value_is_masked_even_alone() -> None:
    basic = base64.b64encode(b"USER:SECRET1").decode()
    assert redact(f"Authorization: Basic {basic}") == f"Authorization: Basic {MASK}"
    assert redact(f"sent Basic {basic} to the registry") == f"sent Basic {MASK} to the registry"


@pytest.mark.parametrize(
    "message",
    [
        "schema registry http://127.0.0.1:8081/apis/ccompat/v7 did not answer GET /x",
        "Basic authentication failed; header 'Authorization: Bearer <EDDY_API_TOKEN>'",
        "postgres_sink: the schema its tables live in (created if missing)",
        "invalid token: expired",
        "window [0, 5000) of key sensor_1: count=3 avg=20.5",
        "a SASL_* protocol without a user name or password stops the worker",
        "api_token=SecretStr('**********') sasl_password=None",
    ],
)
def test_text_without_a_credential_is_shown_as_it_is(message: str) -> None:
    assert redact(message) == message


@given(text=st.text(alphabet=st.characters(exclude_characters="@=:"), max_size=200))
def test_text_without_at_equals_or_colon_is_unchanged(text: str) -> None:
    assert redact(text) == text


# --- remembered secrets: a SecretStr, or a password a library prints alone --------------


@given(secret=secrets)
def test_a_remembered_secret_is_masked_alone_and_in_its_url_encoded_forms(secret: str) -> None:
    remember([secret])
    for form in forms(secret):
        assert_hidden(redact(f"login failed for {form}!"), secret)


def test_short_values_are_not_remembered() -> None:
    remember(["abc", None])
    assert redact("abc") == "abc"


def test_the_password_of_a_url_setting_is_remembered_decoded() -> None:
    remember_in("http://USER:p%2Fss%2Bword@registry:8081/apis")
    # A client that decoded it for basic auth, and says so in its own words:
    assert redact("401 for user USER with p/ss+word") == f"401 for user USER with {MASK}"
    assert "USER" in redact("USER")  # a user name alone is not a secret


def test_loading_the_settings_remembers_every_secret_of_the_environment(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EDDY_API_TOKEN", "tok-3141592653")
    monkeypatch.setenv("EDDY_SCHEMA_REGISTRY_PASSWORD", "registry-pw-27")
    monkeypatch.setenv("EDDY_SNAPSHOT_ROOT", "s3://AKID:s3%2Fsecret%2B1@bucket/p")
    monkeypatch.setenv("EDDY_ROOM_SERVICE_URL", "http://rooms:room-pw-42@rooms:8090")
    load_settings((RoomSettings,))
    said = "tok-3141592653 registry-pw-27 s3/secret+1 room-pw-42"
    assert redact(said) == " ".join([MASK] * 4)


# --- settings: repr, str, errors, eddy config --------------------------------------------


class LookupSettings(AgentSettings):
    lookup_url: str = Field("http://127.0.0.1:1")
    lookup_password: SecretStr | None = None


def test_a_settings_repr_and_str_mask_credentials(clean_env: Path) -> None:
    settings = Settings(
        snapshot_root="s3://AKID:SNAPSECRET9@bucket/p",
        sasl_password=SecretStr("TOKENSECRET9"),
        api_advertised_url="http://peer:PEERSECRET9@10.0.0.7:8000",
    )
    agent = LookupSettings(lookup_url="https://u:LOOKSECRET9@x", lookup_password="PWSECRET99")
    for shown in (repr(settings), str(settings), repr(agent), str(agent), f"{agent!r}"):
        assert_hidden(shown, "SNAPSECRET9", "TOKENSECRET9", "PEERSECRET9", "LOOKSECRET9")
        assert "PWSECRET99" not in shown
    assert "s3://***@bucket/p" in repr(settings)
    # The values themselves are intact: a worker and its child processes use them.
    assert settings.to_env()["EDDY_SNAPSHOT_ROOT"] == "s3://AKID:SNAPSECRET9@bucket/p"
    assert agent.lookup_url == "https://u:LOOKSECRET9@x"


def test_a_bad_setting_is_named_without_its_credentials(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The validator's message quotes the value.
    monkeypatch.setenv("EDDY_BOOTSTRAP_SERVERS", "sasl://eddy:KAFKASECRET7@broker")
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert "EDDY_BOOTSTRAP_SERVERS: Value error" in str(error.value)
    assert_hidden(str(error.value), "KAFKASECRET7")


def test_eddy_config_masks_urls_and_secrets_of_the_framework_and_the_agents(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EDDY_SNAPSHOT_ROOT", "s3://AKID:SNAP%2FSECRET@bucket/p?region=eu")
    monkeypatch.setenv("EDDY_SAVEPOINT_ROOT", "s3://bucket/sp?secret_key=SAVESECRET")
    monkeypatch.setenv("EDDY_SASL_PASSWORD", "SASLSECRET")
    monkeypatch.setenv("EDDY_API_TOKEN", "TOKENSECRET")
    monkeypatch.setenv("EDDY_ROOM_SERVICE_URL", "http://rooms:ROOMSECRET@127.0.0.1:8090")
    monkeypatch.setenv("EDDY_POSTGRES_DSN", "postgresql://eddy:DSNSECRET@db/eddy")
    secrets_set = ["SNAP/SECRET", "SAVESECRET", "SASLSECRET", "TOKENSECRET", "ROOMSECRET"]
    for argv in (["config"], ["config", "--json"]):
        assert eddy(argv) == 0
        out, err = capsys.readouterr()
        assert_hidden(out + err, *secrets_set, "DSNSECRET")
        assert "s3://***@bucket/p?region=eu" in out
        assert "http://***@127.0.0.1:8090" in out
    assert eddy(["config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "EDDY_API_TOKEN=**********" in lines
    assert "EDDY_POSTGRES_DSN=**********" in lines


def test_an_advertised_url_with_a_password_is_refused_next_to_a_token_without_showing_it(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its user info would go out as basic auth in the header the token needs.
    monkeypatch.setenv("EDDY_API_ADVERTISED_URL", "http://peer:PEERSECRET@10.0.0.7:8000")
    monkeypatch.setenv("EDDY_API_TOKEN", "TOKENSECRET")
    assert eddy(["config"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("eddy: invalid configuration: settings: Value error, EDDY_API_ADVER")
    assert err.count("\n") == 1
    assert_hidden(err, "PEERSECRET", "TOKENSECRET")
    monkeypatch.delenv("EDDY_API_TOKEN")  # without a token, basic auth is the caller's choice
    assert eddy(["config"]) == 0
    assert "EDDY_API_ADVERTISED_URL=http://***@10.0.0.7:8000" in capsys.readouterr().out


def test_a_command_error_is_one_line_without_credentials(
    capsys: pytest.CaptureFixture[str],
) -> None:
    error = ConfigError("cannot open snapshot root 's3://AK:ERRSECRET@b/p?secret_key=QSECRET'")
    assert print_error("eddy", error) == 2
    err = capsys.readouterr().err
    assert err == "eddy: cannot open snapshot root 's3://***@b/p?secret_key=***'\n"


# --- logs ----------------------------------------------------------------------------------


@pytest.fixture
def redacting_logs() -> Iterator[StringIO]:
    """This process's logging redacted (as every Eddy process's), into a buffer."""
    factory = logging.getLogRecordFactory()
    eddy_logs.install_redaction()
    out = StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter(eddy_logs.FORMAT))
    # A logger with a handler of its own that does not propagate, as uvicorn's.
    own = logging.getLogger("test_secrets.own")
    own.addHandler(handler)
    own.propagate = False
    own.setLevel(logging.INFO)
    try:
        yield out
    finally:
        own.removeHandler(handler)
        logging.setLogRecordFactory(factory)


def test_log_messages_their_arguments_and_tracebacks_are_redacted(
    redacting_logs: StringIO,
) -> None:
    remember(["REMEMBERED42"])
    log = logging.getLogger("test_secrets.own")
    log.info("registry %s did not answer", "http://u:ARGSECRET1@registry:8081")
    log.warning("lookup with REMEMBERED42 failed")
    try:
        raise RuntimeError("cannot open s3://AK:EXCSECRET1@bucket/p")
    except RuntimeError:
        log.exception("snapshot failed")
    log.info("stack", stack_info=True, extra={"x": "http://u:STACKSECRET@h"})
    text = redacting_logs.getvalue()
    assert_hidden(text, "ARGSECRET1", "REMEMBERED42", "EXCSECRET1")
    assert "registry http://***@registry:8081 did not answer" in text
    assert "RuntimeError: cannot open s3://***@bucket/p" in text  # the traceback is there


def test_an_uncaught_exception_prints_its_traceback_redacted() -> None:
    # A real process: Python's own excepthook, replaced as every Eddy command does.
    program = (
        "import threading\n"
        "from eddy import logs\n"
        "logs.install_redaction()\n"
        "def fail(): raise RuntimeError('http://u:THREADSECRET@h')\n"
        "t = threading.Thread(target=fail); t.start(); t.join()\n"
        "raise RuntimeError('cannot reach s3://AK:MAINSECRET@bucket')\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.returncode == 1
    assert_hidden(done.stderr, "THREADSECRET", "MAINSECRET")
    assert "RuntimeError: cannot reach s3://***@bucket" in done.stderr
    assert "Exception in thread" in done.stderr
    assert "RuntimeError: http://***@h" in done.stderr


def test_a_hook_installed_by_the_host_is_left_alone() -> None:
    before = threading.excepthook  # pytest's, catching exceptions of test threads
    eddy_logs.install_redaction()
    assert threading.excepthook is before


# --- dead letters, metrics, API error bodies ----------------------------------------------


def test_a_dead_letters_reason_and_its_metric_label_are_redacted() -> None:
    metrics = Metrics()
    output = TaskOutput("stage", "dead-letters", metrics)
    reason = "schema registry http://USER:DLSECRET1@127.0.0.1:8081: no schema 42"
    output.dead_letter(FakeRecord(offset=7, value=b"\x00"), reason)
    [pending] = output.take()
    headers = dict(pending.headers)
    assert headers["eddy.reason"] == b"schema registry http://***@127.0.0.1:8081: no schema 42"
    assert pending.value == b"\x00"  # the record's own bytes travel untouched
    assert_hidden(generate_latest(metrics.registry).decode(), "DLSECRET1")


def test_metric_labels_never_show_a_reason_s_secret_nor_grow_with_client_methods() -> None:
    metrics = Metrics()
    remember(["LABELSECRET"])
    metrics.restarts.labels("stage", "login LABELSECRET refused").inc()
    metrics.dead_letters.labels(stage="s", reason="s3://a:KWSECRET1@b").inc()
    for method in ("GET", "LABELSECRET", "XYZZY"):
        metrics.http_seconds.labels("/status", method, "200").observe(0.01)
    metrics.http_seconds.labels(route="/x", method="BREW", status="418").observe(0.01)
    text = generate_latest(metrics.registry).decode()
    assert_hidden(text, "LABELSECRET", "KWSECRET1")
    methods = {
        line.split('method="')[1].split('"')[0] for line in text.splitlines() if "method=" in line
    }
    assert methods == {"GET", "OTHER"}


def api_with_errors() -> FastAPI:
    app = FastAPI()
    errors.install(app)

    @app.get("/bad")
    async def bad() -> None:
        raise errors.BadRequestError("snapshot root s3://AK:BODYSECRET1@b/p unreadable")

    @app.get("/crash")
    async def crash() -> None:
        raise RuntimeError("peer http://u:CRASHSECRET@10.0.0.7 refused")

    @app.get("/count")
    async def count(n: int) -> int:
        return n

    return app


async def test_api_error_bodies_never_show_a_credential() -> None:
    transport = httpx.ASGITransport(app=api_with_errors(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        answers = [
            await client.get("/bad"),
            await client.get("/crash"),
            await client.get("/count", params={"n": "http://u:QSECRET1@x"}),
            await client.get("/nothing/http:%2F%2Fu:PATHSECRET@x"),
        ]
    assert [a.status_code for a in answers] == [400, 500, 422, 404]
    for answer in answers:
        assert answer.headers["content-type"] == "application/problem+json"
        assert_hidden(answer.text, "BODYSECRET1", "CRASHSECRET", "QSECRET1", "PATHSECRET")
    assert answers[0].json()["detail"] == "snapshot root s3://***@b/p unreadable"
