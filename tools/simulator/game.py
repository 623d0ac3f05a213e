"""A mobile game: teams earn a power-up by popping 500 bubbles in one minute.

A classic case of why event time matters: a player's phone goes offline in
a tunnel, keeps recording what the player does, and delivers it all at once
when it comes out, tens of seconds late. Counted by arrival time those bubbles
land in the wrong minute; counted by event time they may lift a team over 500
in a minute that already closed, which is what allowed lateness is for.

Teams differ in how many bubbles they pop per minute, spread around the
power-up mark (70% to 120% of it on average, from the weakest to the strongest
team), so with the defaults some teams earn power-ups and some never do, and a
test can tell a pipeline that awards every team, or none, from a correct one.
With the defaults one team is just above the mark: it makes most minutes but
not all, so a late burst can decide whether it earns the power-up.

Bubbles per event are ``1 + Binomial(19, p)``: within 1..20 and, with
five players at one event a second, mostly 1-3, which is what 500 a minute
implies. The low variance is deliberate: teams well below the mark never reach
it by luck, so "some teams never earn it" is a property a test can rely on.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from eddy.examples.records import GameEvent
from tools.simulator.schedule import (
    InFlight,
    Scheduled,
    Stream,
    common_problems,
    probability_problem,
    raise_problems,
    range_problem,
)

MIN_BUBBLES = 1
MAX_BUBBLES = 20
MINUTE_MS = 60_000
# Expected bubbles per minute of the weakest and strongest team, relative to
# the power-up mark; teams in between are spread evenly.
SKILL_RANGE = (0.7, 1.2)
MAX_TEAMS = 10_000
MAX_PLAYERS = 10_000
MAX_EVENTS_PER_S = 100.0
MIN_EVENTS_PER_S = 0.001


@dataclass(frozen=True, slots=True, kw_only=True)
class GameConfig:
    """What to simulate. Equal configs (seed included) give equal deliveries.

    Attributes:
        seed: Seeds the only random generator used.
        start_ms: Event time before which nothing happens.
        teams: Number of teams, ``team_1`` .. ``team_T``.
        players: Players per team, ``player_<team>_<n>``.
        count: Events to send; ``None``: no limit.
        events_per_s: Mean events per player and second; gaps are uniform in
            ``[0.5, 1.5]`` times the mean.
        disorder_ms: Largest delivery delay of an event while online.
        offline_probability: Chance, per player and second, that the phone
            enters a tunnel.
        offline_min_ms: Shortest time in a tunnel.
        offline_max_ms: Longest time in a tunnel.
        powerup_bubbles: The bubbles per minute that earn a power-up; team
            skills are spread around it.
    """

    seed: int
    start_ms: int
    teams: int = 4
    players: int = 5
    count: int | None = None
    events_per_s: float = 1.0
    disorder_ms: int = 1_000
    offline_probability: float = 0.003
    offline_min_ms: int = 20_000
    offline_max_ms: int = 90_000
    powerup_bubbles: int = 500

    def __post_init__(self) -> None:
        """Raises ConfigError naming every bad value."""
        raise_problems("game", _problems(self))

    def mean_bubbles(self, team: int) -> float:
        """Expected bubbles per event of team ``team`` (0-based), within 1..20.

        Chosen so the team's expected bubbles per minute are its share of
        :data:`SKILL_RANGE` times ``powerup_bubbles``; clamped where the team
        size and rate make that impossible with 1..20 bubbles per event.
        """
        low, high = SKILL_RANGE
        skill = (
            (low + high) / 2 if self.teams == 1 else low + (high - low) * team / (self.teams - 1)
        )
        events_per_minute = self.players * self.events_per_s * MINUTE_MS / 1000
        wanted = skill * self.powerup_bubbles / events_per_minute
        return min(float(MAX_BUBBLES), max(float(MIN_BUBBLES), wanted))


def _problems(config: GameConfig) -> Iterator[str]:
    yield from common_problems(start_ms=config.start_ms, count=config.count)
    if not 1 <= config.teams <= MAX_TEAMS:
        yield f"teams must be between 1 and {MAX_TEAMS}, got {config.teams}"
    if not 1 <= config.players <= MAX_PLAYERS:
        yield f"players must be between 1 and {MAX_PLAYERS}, got {config.players}"
    rate = config.events_per_s
    if not (math.isfinite(rate) and MIN_EVENTS_PER_S <= rate <= MAX_EVENTS_PER_S):
        yield (
            f"events_per_s must be between {MIN_EVENTS_PER_S:g} and {MAX_EVENTS_PER_S:g}, "
            f"got {rate}"
        )
    if config.disorder_ms < 0:
        yield f"disorder_ms must not be negative, got {config.disorder_ms}"
    yield from probability_problem("offline_probability", config.offline_probability)
    yield from range_problem(
        "time offline (ms)", config.offline_min_ms, config.offline_max_ms, minimum=1
    )
    if config.powerup_bubbles < 1:
        yield f"powerup_bubbles must be at least 1, got {config.powerup_bubbles}"


@dataclass(slots=True)
class _Player:
    name: str
    team: str
    # Bubbles per event are 1 + Binomial(19, extra): bounded 1..20, mean as configured.
    extra: float
    offline_until_ms: int = -1


class _Match:
    def __init__(self, config: GameConfig) -> None:
        self._config = config
        self._rng = random.Random(config.seed)
        self.players = [
            _Player(
                name=f"player_{team}_{n}",
                team=f"team_{team}",
                extra=(config.mean_bubbles(team - 1) - MIN_BUBBLES) / (MAX_BUBBLES - MIN_BUBBLES),
            )
            for team in range(1, config.teams + 1)
            for n in range(1, config.players + 1)
        ]
        mean_gap_ms = 1000.0 / config.events_per_s
        self._gap_ms = (max(1, round(mean_gap_ms / 2)), max(1, round(mean_gap_ms * 3 / 2)))

    def gap_ms(self) -> int:
        return self._rng.randint(*self._gap_ms)

    def event(self, player: _Player, at_ms: int, gap_ms: int) -> Scheduled[GameEvent]:
        """The player's event at ``at_ms``, which came ``gap_ms`` after their previous one."""
        rng = self._rng
        bubbles = MIN_BUBBLES + sum(
            rng.random() < player.extra for _ in range(MAX_BUBBLES - MIN_BUBBLES)
        )
        record = GameEvent(player=player.name, team=player.team, ts=at_ms, bubbles=bubbles)
        starts = False
        if at_ms >= player.offline_until_ms and rng.random() < self._offline_chance(gap_ms):
            config = self._config
            player.offline_until_ms = at_ms + rng.randint(
                config.offline_min_ms, config.offline_max_ms
            )
            starts = True
        if at_ms < player.offline_until_ms:
            return Scheduled(
                player.offline_until_ms,
                at_ms,
                Stream.GAME,
                player.team,
                record,
                late=True,
                starts_outage=starts,
            )
        deliver_at = at_ms + rng.randint(0, self._config.disorder_ms)
        return Scheduled(deliver_at, at_ms, Stream.GAME, player.team, record)

    def _offline_chance(self, gap_ms: int) -> float:
        # Per event, so the per-second probability holds whatever the event rate.
        return 1.0 - math.pow(1.0 - self._config.offline_probability, gap_ms / 1000)


def generate_game(config: GameConfig) -> Iterator[Scheduled[GameEvent]]:
    """Yield the game's events in non-decreasing delivery order, lazily.

    Players act independently, each about ``events_per_s`` times a second. An
    event made in a tunnel is delivered when the phone comes out, with every
    other event buffered there: a burst at one instant, the oldest as late as
    the whole time offline. Bursts are delivered at the real exit time even
    after the run's last event, so a bounded run ends up to
    ``offline_max_ms`` after its last event.

    Yields:
        Events keyed by team, each at or after its own event time.
    """
    match = _Match(config)
    in_flight: InFlight[GameEvent] = InFlight()
    # (next event time, player index, gap before it): whoever acts next.
    upcoming: list[tuple[int, int, int]] = []
    for index in range(len(match.players)):
        gap = match.gap_ms()
        upcoming.append((config.start_ms + gap, index, gap))
    heapq.heapify(upcoming)
    remaining = config.count
    while remaining is None or remaining > 0:
        at_ms, index, gap = heapq.heappop(upcoming)
        yield from in_flight.due(at_ms)
        in_flight.push(match.event(match.players[index], at_ms, gap))
        following = match.gap_ms()
        heapq.heappush(upcoming, (at_ms + following, index, following))
        remaining = None if remaining is None else remaining - 1
    yield from in_flight.drain()
