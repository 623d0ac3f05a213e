"""``eddy consume`` without a broker: how a record is decoded and printed, and the
command-line mistakes refused in one line before any connection."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from aiokafka import ConsumerRecord
from hypothesis import given
from hypothesis import strategies as st

from eddy.cli import main as eddy
from eddy.consume import Decoder, raw_json, text_line
from eddy.examples.topics import READINGS

READING = {"sensor_id": "s1", "timestamp_ms": 1000, "temperature": 61.5}


def record(
    value: bytes | None, key: bytes | None = b"s1", headers: tuple[tuple[str, bytes], ...] = ()
) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord("sensor-readings", 2, 41, 1000, 0, key, value, None, 0, 0, list(headers))


def test_a_record_is_decoded_by_its_topics_serde() -> None:
    line = Decoder(READINGS.codec).decode(
        record(json.dumps(READING).encode(), headers=(("trace", b"abc"),))
    )
    assert line == {
        "partition": 2,
        "offset": 41,
        "timestamp_ms": 1000,
        "key": "s1",
        "value": READING,
        "headers": {"trace": "abc"},
    }


def test_a_record_that_does_not_decode_is_shown_raw_with_the_reason() -> None:
    line = Decoder(READINGS.codec).decode(record(b'{"sensor_id": "s1"}'))
    assert line["value"] == '{"sensor_id": "s1"}'
    assert line["error"].startswith("value: ")
    assert "timestamp_ms" in line["error"]  # the missing field is named
    assert "\n" not in line["error"]


def test_an_undeclared_topic_is_read_raw_and_bytes_that_are_not_text_as_base64() -> None:
    line = Decoder(None).decode(record(b"\xff\x00", key=None, headers=(("bin", b"\x80"),)))
    assert line["key"] is None
    assert line["value"] == {"base64": base64.b64encode(b"\xff\x00").decode()}
    assert line["headers"] == {"bin": {"base64": "gA=="}}
    assert "error" not in line  # raw is what was asked for, not a failure


@given(st.binary(max_size=64))
def test_raw_bytes_come_back_from_their_json_form(data: bytes) -> None:
    shown = json.loads(json.dumps(raw_json(data)))
    back = shown.encode() if isinstance(shown, str) else base64.b64decode(shown["base64"])
    assert back == data


def test_the_text_form_is_one_line_with_every_part() -> None:
    line = Decoder(READINGS.codec).decode(
        record(b'{"sensor_id": "s1"\n}', headers=(("eddy.reason", b"late"),))
    )
    text = text_line(line)
    assert "\n" not in text.replace("\\n", "")
    assert text.startswith("partition=2 offset=41 timestamp_ms=1000 key=s1 value=")
    assert 'headers={"eddy.reason":"late"}' in text
    assert " error=value: " in text


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (
            ["--count", "2", "--follow"],
            "eddy: argument --follow: not allowed with argument --count",
        ),
        (["--from-end", "--from-beginning"], "eddy: argument --from-beginning: not allowed"),
        (["--count", "0"], "eddy: argument --count: 0 is not in [1, "),
        (["--timeout-ms", "soon"], "eddy: argument --timeout-ms: 'soon' is not a number"),
    ],
)
def test_mistakes_on_the_command_line_are_one_line(
    argv: list[str], start: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        eddy(["consume", "sensor-readings", *argv])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(start), err


def test_no_broker_is_one_line_without_the_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for name in list(os.environ):
        if name.startswith("EDDY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("EDDY_BOOTSTRAP_SERVERS", "127.0.0.1:9")
    monkeypatch.setenv("EDDY_SNAPSHOT_ROOT", str(tmp_path))
    assert eddy(["consume", "sensor-readings", "--count", "1"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("eddy: consume: cannot reach the broker at 127.0.0.1:9"), err
    assert "Traceback" not in err


def test_send_takes_headers_as_name_equals_value() -> None:
    from eddy.errors import ConfigError
    from eddy.send import headers_of

    assert headers_of(["trace=t1", "expr=a=b", "empty="]) == [
        ("trace", b"t1"),
        ("expr", b"a=b"),
        ("empty", b""),
    ]
    for bad in ("trace", "=t1"):
        with pytest.raises(ConfigError, match=r"send: --header .* is not NAME=VALUE"):
            headers_of([bad])


@pytest.mark.parametrize(
    ("argv", "from_end"), [([], False), (["--from-beginning"], False), (["--from-end"], True)]
)
def test_reading_starts_at_the_beginning_unless_told(argv: list[str], from_end: bool) -> None:
    from eddy.cli import build_parser

    assert build_parser().parse_args(["consume", "t", *argv]).from_end is from_end
