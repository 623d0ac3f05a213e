"""Seeded, replayable fault schedules (pure: no I/O besides the JSON file).

A run is fully described by a :class:`RunConfig` (workload sizes, settings) and
the list of :class:`Fault` s drawn from its seed. Both are saved as
``schedule.json`` next to the run's results, so a failing run is replayed with
``python -m tools chaos --replay <run>/schedule.json``: same records, same
faults at the same points of the input, against whatever runtime is checked out.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from tools.chaos.errors import ChaosError, ReplayError

FORMAT = "eddy-chaos-schedule/1"


class FaultKind(StrEnum):
    """What the injector does; the docstring of ``tools.chaos.faults`` says how."""

    KILL = "kill"  # SIGKILL a worker, restart it
    TERM = "term"  # SIGTERM a worker (commits, leaves the group), restart it
    ZOMBIE = "zombie"  # SIGSTOP past the session timeout while another worker takes over
    JOIN = "join"  # an extra worker joins mid-stream
    LEAVE = "leave"  # an extra worker leaves (SIGTERM), not restarted
    BROKER = "broker"  # SIGKILL the local broker, start it again 1-3 s later
    WIPE = "wipe"  # SIGKILL a worker, delete its state directory, restart it
    RESTORE_KILL = "restore_kill"  # wipe, restart, SIGKILL it while it restores, restart
    # Network faults: only on a fleet (python -m tools fleet), hosts of their own.
    CUT_SHORT = "cut_short"  # a worker cut from the brokers for half the session timeout
    CUT_LONG = "cut_long"  # ... for longer than the transaction timeout: it must be fenced
    CUT_PEERS = "cut_peers"  # a worker cut from the other workers only
    ISOLATE_LEADER = "isolate_leader"  # a partition leader cut from the other brokers
    SLOW = "slow"  # a worker's link to the brokers slowed down (latency, bandwidth)
    READDRESS = "readdress"  # a worker restarted under a new address


NETWORK_KINDS: tuple[FaultKind, ...] = (
    FaultKind.CUT_SHORT,
    FaultKind.CUT_LONG,
    FaultKind.CUT_PEERS,
    FaultKind.ISOLATE_LEADER,
    FaultKind.SLOW,
    FaultKind.READDRESS,
)
# A fleet has one host per worker: no extra worker can join it.
NOT_ON_A_FLEET = frozenset({FaultKind.JOIN, FaultKind.LEAVE})
ALL_KINDS: tuple[FaultKind, ...] = tuple(k for k in FaultKind if k not in NETWORK_KINDS)
# Faults after which an exactly-once run must have left aborted transactions behind.
ABORTING_KINDS = frozenset(
    {
        FaultKind.KILL,
        FaultKind.ZOMBIE,
        FaultKind.WIPE,
        FaultKind.RESTORE_KILL,
        FaultKind.CUT_LONG,
    }
)


@dataclass(frozen=True)
class Fault:
    """One fault: when (fraction of the input produced), what, and to whom.

    ``target`` picks among the workers alive at that moment (``alive[target %
    len(alive)]``), so a schedule stays meaningful whatever the worker count.
    ``pause_s`` is the SIGSTOP time of a zombie, the broker's down time, or how long
    a network fault lasts before it heals.
    """

    at_fraction: float
    kind: FaultKind
    target: int
    pause_s: float = 0.0


@dataclass(frozen=True)
class RunConfig:
    """Everything that makes a run repeatable besides the code under test."""

    seed: int
    records: int = 20_000  # checker records
    keys: int = 500
    readings: int = 10_000  # sensor readings (plus late, malformed and closing ones)
    sensors: int = 20
    workers: int = 2
    kinds: tuple[FaultKind, ...] = ALL_KINDS
    faults_per_kind: int = 1
    guarantee: str = "exactly_once"
    commit_interval_ms: int = 100
    session_timeout_ms: int = 6_000
    partitions: int = 6
    # The workers' EDDY_WINDOW_FIRINGS_PER_CHECKPOINT: small, the windows a watermark
    # closes are fired over several checkpoints, which the faults then hit.
    window_firings_per_checkpoint: int = 10_000
    # Target time to produce the input. 0 = long enough for the faults to land
    # while records still flow (about 8 s per fault).
    duration_s: float = 0.0
    max_workers: int = field(default=4)
    # Brokers abort a worker's open transaction after this long (EDDY_TRANSACTION_TIMEOUT_MS).
    transaction_timeout_ms: int = 30_000
    fleet: bool = False  # hosts of their own: network faults possible

    def __post_init__(self) -> None:
        problems = []
        if self.records < 100 or self.keys < 1 or self.keys > self.records:
            problems.append("--records must be >= 100 and --keys between 1 and --records")
        if self.readings < 0 or self.sensors < 1:
            problems.append("--readings must be >= 0 and --sensors >= 1")
        if not 1 <= self.workers <= self.max_workers - 1:
            problems.append(f"--workers must be between 1 and {self.max_workers - 1}")
        if self.faults_per_kind < 0:
            problems.append("--faults-per-kind must be >= 0")
        if self.guarantee not in ("exactly_once", "at_least_once"):
            problems.append("--guarantee must be exactly_once or at_least_once")
        if not 10 <= self.commit_interval_ms <= 60_000:
            problems.append("--commit-interval-ms must be between 10 and 60000")
        if self.window_firings_per_checkpoint < 1:
            problems.append("--window-firings-per-checkpoint must be >= 1")
        if self.session_timeout_ms < 1_000:
            problems.append("--session-timeout-ms must be >= 1000")
        if self.transaction_timeout_ms < 1_000:
            problems.append("--transaction-timeout-ms must be >= 1000")
        network = [k.value for k in self.kinds if k in NETWORK_KINDS]
        if network and not self.fleet:
            problems.append(
                f"{', '.join(network)}: network faults need a fleet (python -m tools fleet)"
            )
        misplaced = [k.value for k in self.kinds if k in NOT_ON_A_FLEET]
        if misplaced and self.fleet:
            problems.append(f"{', '.join(misplaced)}: a fleet has no host for an extra worker")
        if problems:
            raise ChaosError("; ".join(problems))

    @property
    def fault_count(self) -> int:
        return len(self.kinds) * self.faults_per_kind

    @property
    def feed_seconds(self) -> float:
        return self.duration_s or max(20.0, 8.0 * self.fault_count + 10.0)


@dataclass(frozen=True)
class Schedule:
    config: RunConfig
    faults: tuple[Fault, ...]


def parse_kinds(text: str, all_kinds: tuple[FaultKind, ...] = ALL_KINDS) -> tuple[FaultKind, ...]:
    """``all`` (``all_kinds``) or a comma-separated list such as ``kill,term,zombie``."""
    if text.strip().lower() in ("all", ""):
        return all_kinds
    kinds: list[FaultKind] = []
    for name in text.split(","):
        name = name.strip().lower().replace("-", "_")
        if not name:
            continue
        try:
            kind = FaultKind(name)
        except ValueError:
            choices = ", ".join(k.value for k in FaultKind)
            raise ChaosError(f"unknown fault kind {name!r}; choose from all, {choices}") from None
        if kind not in kinds:
            kinds.append(kind)
    return tuple(kinds)


def build_schedule(
    seed: int,
    kinds: tuple[FaultKind, ...],
    faults_per_kind: int,
    *,
    session_timeout_ms: int = 6_000,
    transaction_timeout_ms: int = 30_000,
    start: float = 0.08,
    end: float = 0.85,
) -> tuple[Fault, ...]:
    """``faults_per_kind`` faults of each kind, shuffled, spread over ``[start, end)``.

    One fault per slot of equal width, jittered inside its slot: faults never
    bunch up, and the last one leaves input behind it to process afterwards.
    """
    rng = random.Random(f"eddy-chaos-schedule:{seed}")
    order = [kind for kind in kinds for _ in range(faults_per_kind)]
    rng.shuffle(order)
    width = (end - start) / max(1, len(order))
    faults = []
    for i, kind in enumerate(order):
        at = round(start + width * (i + rng.uniform(0.25, 0.75)), 4)
        pause = 0.0
        if kind is FaultKind.ZOMBIE:
            pause = round(1.5 * session_timeout_ms / 1000, 2)
        elif kind is FaultKind.BROKER:
            pause = round(rng.uniform(1.0, 3.0), 2)
        else:
            pause = network_pause_s(kind, rng, session_timeout_ms, transaction_timeout_ms)
        faults.append(Fault(at, kind, rng.randrange(1 << 16), pause))
    return tuple(faults)


def network_pause_s(
    kind: FaultKind, rng: random.Random, session_timeout_ms: int, transaction_timeout_ms: int
) -> float:
    """How long a network fault lasts: a short cut heals before the group notices (a
    third to two thirds of the session timeout), a long one outlives the transaction
    timeout (the broker aborts, the group moves on); an isolated leader stays cut past
    the broker session (9 s) so its leadership moves."""
    session_s, transaction_s = session_timeout_ms / 1000, transaction_timeout_ms / 1000
    pauses = {
        FaultKind.CUT_SHORT: (session_s / 3, 2 * session_s / 3),
        FaultKind.CUT_LONG: (1.2 * transaction_s, 1.5 * transaction_s),
        FaultKind.CUT_PEERS: (3.0, 8.0),
        FaultKind.ISOLATE_LEADER: (10.0, 15.0),
        FaultKind.SLOW: (4.0, 8.0),
    }
    low, high = pauses.get(kind, (0.0, 0.0))
    return round(rng.uniform(low, high), 2) if high else 0.0


def make_schedule(config: RunConfig) -> Schedule:
    faults = build_schedule(
        config.seed,
        config.kinds,
        config.faults_per_kind,
        session_timeout_ms=config.session_timeout_ms,
        transaction_timeout_ms=config.transaction_timeout_ms,
    )
    return Schedule(config, faults)


def to_json(schedule: Schedule) -> dict[str, Any]:
    config = asdict(schedule.config)
    config["kinds"] = [k.value for k in schedule.config.kinds]
    faults = [asdict(f) | {"kind": f.kind.value} for f in schedule.faults]
    return {"format": FORMAT, "config": config, "faults": faults}


def from_json(data: Any) -> Schedule:
    """The inverse of :func:`to_json`.

    Raises:
        ReplayError: the data is not a schedule of this format.
    """
    try:
        if data["format"] != FORMAT:
            raise ReplayError(f"not an {FORMAT} file (format {data['format']!r})")
        raw = dict(data["config"])
        raw["kinds"] = tuple(FaultKind(k) for k in raw["kinds"])
        config = RunConfig(**raw)
        faults = tuple(
            Fault(
                float(f["at_fraction"]), FaultKind(f["kind"]), int(f["target"]), float(f["pause_s"])
            )
            for f in data["faults"]
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ReplayError(f"not a valid chaos schedule ({type(exc).__name__}: {exc})") from None
    return Schedule(config, tuple(sorted(faults, key=lambda f: f.at_fraction)))


def save(schedule: Schedule, path: Path) -> None:
    path.write_text(json.dumps(to_json(schedule), indent=2) + "\n")


def load(path: Path) -> Schedule:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ReplayError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ReplayError(f"{path} is not JSON: {exc}") from None
    return from_json(data)
