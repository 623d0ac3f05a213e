"""The link proxy's settings, control file and bandwidth rule (no root, no network)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools.fleet.errors import FleetError
from tools.fleet.proxy import (
    BURST_S,
    DEFAULT_MARK,
    ControlFile,
    LinkSettings,
    Proxy,
    ProxySettings,
    TokenBucket,
    pieces,
)

links = st.builds(
    LinkSettings,
    latency_ms=st.integers(0, 60_000),
    bandwidth_bytes_per_s=st.integers(0, 10**9),
    drop=st.floats(0.0, 1.0),
    down=st.booleans(),
)


@given(st.integers(0, 10**6), links, links)
def test_settings_survive_the_control_file(
    generation: int, up: LinkSettings, down: LinkSettings
) -> None:
    settings = ProxySettings(generation, up, down)
    assert ProxySettings.from_json(settings.to_json()) == settings


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"latency_ms": -1}, "latency_ms must be an integer >= 0, got -1"),
        ({"latency_ms": 1.5}, "latency_ms must be an integer >= 0, got 1.5"),
        ({"latency_ms": True}, "latency_ms must be an integer >= 0, got True"),
        ({"bandwidth_bytes_per_s": -5}, "bandwidth_bytes_per_s must be an integer >= 0, got -5"),
        ({"drop": 1.5}, "drop must be a probability from 0.0 to 1.0, got 1.5"),
        ({"drop": "0.1"}, "drop must be a probability from 0.0 to 1.0, got '0.1'"),
        ({"down": 1}, "down must be true or false, got 1"),
    ],
)
def test_a_bad_value_is_refused_with_its_name(changes: dict[str, object], reason: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(reason)}$"):
        LinkSettings(**changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "{",
            "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        ("[]", "expected an object with generation, upstream and downstream"),
        (
            '{"generation": 1, "upstream": {"latency": 5}, "downstream": {}}',
            "upstream: unknown setting 'latency'",
        ),
        (
            '{"generation": 1, "upstream": {}, "downstream": {"drop": 2}}',
            "downstream: drop must be a probability from 0.0 to 1.0, got 2",
        ),
        (
            '{"generation": "1", "upstream": {}, "downstream": {}}',
            "generation must be an integer, got '1'",
        ),
        ('{"generation": 1, "upstream": 3, "downstream": {}}', "upstream must be an object, got 3"),
    ],
)
def test_a_bad_control_file_gets_a_one_line_reason(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(reason)}$"):
        ProxySettings.from_json(text)


def test_the_control_file_is_read_once_per_change(tmp_path: Path) -> None:
    control = ControlFile(tmp_path)
    assert control.poll() is None  # not written yet
    (tmp_path / "settings.json").write_text(ProxySettings(1).to_json())
    assert control.poll() == ProxySettings(1)
    assert control.poll() is None
    tmp = tmp_path / "next"
    tmp.write_text(ProxySettings(2).to_json())
    os.replace(tmp, tmp_path / "settings.json")  # same size and maybe mtime: a new inode
    assert control.poll() == ProxySettings(2)


@given(
    rate=st.integers(1_000, 10**7),
    sizes=st.lists(st.integers(1, 200_000), min_size=1, max_size=30),
)
def test_a_greedy_sender_gets_the_rate_after_one_burst(rate: int, sizes: list[int]) -> None:
    bucket, now_s, total, count = TokenBucket(), 1_000.0, 0, 0
    for size in sizes:
        for piece in pieces(b"x" * size, rate):
            wait_s = bucket.wait_s(len(piece), rate, now_s)
            assert wait_s == 0 or bucket.wait_s(len(piece), rate, now_s + wait_s) == 0
            now_s += wait_s
            total, count = total + len(piece), count + 1
    expected_s = max(0.0, (total - rate * BURST_S) / rate)
    assert now_s - 1_000.0 == pytest.approx(expected_s, rel=1e-6, abs=count / rate)  # a byte each


@given(st.binary(max_size=5_000), st.integers(0, 100_000))
def test_pieces_keep_every_byte_in_order_within_the_burst(chunk: bytes, rate: int) -> None:
    cut = list(pieces(chunk, rate))
    assert b"".join(cut) == chunk
    if rate > 0:
        assert all(len(piece) <= max(1, rate * BURST_S) for piece in cut)


def test_a_bad_change_is_refused_before_it_reaches_the_proxy(tmp_path: Path) -> None:
    proxy = Proxy("efffff-none", "10.231.250.0/30", 15000, tmp_path, DEFAULT_MARK)
    with pytest.raises(
        ValueError, match=r"^drop must be a probability from 0\.0 to 1\.0, got 2\.0$"
    ):
        proxy.set(drop=2.0)
    with pytest.raises(
        ValueError, match=r"^direction must be both, upstream or downstream, got 'up'$"
    ):
        proxy.set(latency_ms=5, direction="up")  # type: ignore[arg-type]
    assert not (tmp_path / "settings.json").exists()
    assert proxy.settings == ProxySettings()


def test_a_bad_subnet_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(
        FleetError, match=r"^proxy subnet '10\.231\.300\.0/24' is not an IPv4 network"
    ):
        Proxy.start("efffff-none", "10.231.300.0/24", 15000, tmp_path)
