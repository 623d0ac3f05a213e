"""The network faults in the chaos harness's seeded schedules (pure: no network)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools.chaos.errors import ChaosError
from tools.chaos.schedule import (
    ALL_KINDS,
    NETWORK_KINDS,
    FaultKind,
    RunConfig,
    build_schedule,
    from_json,
    make_schedule,
    parse_kinds,
    to_json,
)


@given(
    seed=st.integers(0, 10_000),
    session_ms=st.integers(1_000, 60_000),
    transaction_ms=st.integers(1_000, 120_000),
)
def test_cuts_last_shorter_than_the_session_or_longer_than_the_transaction(
    seed: int, session_ms: int, transaction_ms: int
) -> None:
    faults = build_schedule(
        seed,
        NETWORK_KINDS,
        2,
        session_timeout_ms=session_ms,
        transaction_timeout_ms=transaction_ms,
    )
    for fault in faults:
        if fault.kind is FaultKind.CUT_SHORT:
            assert 0 < fault.pause_s * 1000 < session_ms
        elif fault.kind is FaultKind.CUT_LONG:
            assert fault.pause_s * 1000 > transaction_ms
        elif fault.kind is not FaultKind.READDRESS:
            assert fault.pause_s > 0


def test_the_process_faults_schedules_are_what_they_were() -> None:
    # Network kinds draw their durations from the same generator only for themselves:
    # a process-fault schedule of a seed is the one it was before they existed.
    faults = build_schedule(7, ALL_KINDS, 1)
    assert FaultKind.CUT_LONG not in ALL_KINDS
    assert [f.pause_s for f in faults if f.kind is FaultKind.KILL] == [0.0]


def test_network_faults_need_a_fleet() -> None:
    with pytest.raises(ChaosError, match="cut_long: network faults need a fleet"):
        RunConfig(seed=1, kinds=(FaultKind.KILL, FaultKind.CUT_LONG))
    with pytest.raises(ChaosError, match="join: a fleet has no host for an extra worker"):
        RunConfig(seed=1, kinds=(FaultKind.JOIN,), fleet=True)


def test_all_on_a_fleet_means_every_network_kind_and_replays() -> None:
    kinds = parse_kinds("all", NETWORK_KINDS)
    assert kinds == NETWORK_KINDS
    assert parse_kinds("cut-long,kill") == (FaultKind.CUT_LONG, FaultKind.KILL)
    config = RunConfig(seed=3, kinds=kinds, fleet=True, transaction_timeout_ms=10_000)
    schedule = make_schedule(config)
    assert from_json(to_json(schedule)) == schedule
