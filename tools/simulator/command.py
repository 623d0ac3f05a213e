"""``python -m tools simulate``: arguments in, a summary out.

Every run prints its seed, so any run, including one that exposed a bug, can
be repeated exactly with ``--seed`` (and the same other arguments). Scenarios
run together in one process on one clock; ``--count`` bounds each scenario's
main stream, so ``--scenario all --count N`` sends N of each.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import secrets
import signal
import sys
import time

from eddy.errors import ConfigError
from eddy.settings import Settings
from tools.simulator.game import GameConfig
from tools.simulator.generator import SimulationConfig
from tools.simulator.producer import RunStats, SimulationStats, produce_scenarios
from tools.simulator.scenarios import ScenarioPlan, parse_scenarios, scenario_seed
from tools.simulator.schedule import Stream
from tools.simulator.thresholds import ThresholdConfig
from tools.simulator.tweets import TweetConfig
from tools.simulator.vehicles import VehicleConfig

SEED_BITS = 32


def config_from_args(args: argparse.Namespace, *, seed: int, now_ms: int) -> SimulationConfig:
    """Map the ``simulate`` arguments to a config; unset ``--start-ms`` means now.

    Raises:
        ConfigError: an argument is out of range.
    """
    return SimulationConfig(
        sensors=args.sensors,
        rate_per_s=args.rate,
        seed=seed,
        count=args.count,
        start_ms=now_ms if args.start_ms is None else args.start_ms,
    )


def plan_from_args(args: argparse.Namespace, *, seed: int, now_ms: int) -> ScenarioPlan:
    """The scenarios ``--scenario`` names, configured from the other arguments.

    Thresholds go with sensors (unless ``--no-thresholds``) and stop with them;
    named alone, they are bounded by ``--count`` like any scenario.

    Raises:
        ConfigError: an unknown scenario or an argument out of range.
    """
    names = parse_scenarios(args.scenario)
    if args.no_thresholds and names == ("thresholds",):
        raise ConfigError("simulator: --no-thresholds leaves scenario 'thresholds' nothing to do")
    start_ms = now_ms if args.start_ms is None else args.start_ms
    count: int | None = args.count

    def seed_of(name: str) -> int:
        return scenario_seed(seed, name)

    sensors = config_from_args(args, seed=seed, now_ms=now_ms) if "sensors" in names else None
    thresholds = None
    if sensors is not None and not args.no_thresholds:
        thresholds = ThresholdConfig(
            seed=seed_of("thresholds"),
            start_ms=start_ms,
            sensors=args.sensors,
            end_ms=sensors.last_event_time_ms,
        )
    elif sensors is None and "thresholds" in names:
        thresholds = ThresholdConfig(
            seed=seed_of("thresholds"), start_ms=start_ms, sensors=args.sensors, count=count
        )
    vehicles = tweets = game = None
    if "vehicles" in names:
        vehicles = VehicleConfig(
            seed=seed_of("vehicles"), start_ms=start_ms, count=count, vehicles=args.vehicles
        )
    if "tweets" in names:
        tweets = TweetConfig(
            seed=seed_of("tweets"),
            start_ms=start_ms,
            count=count,
            users=args.users,
            rate_per_s=args.tweet_rate,
        )
    if "game" in names:
        game = GameConfig(
            seed=seed_of("game"),
            start_ms=start_ms,
            count=count,
            teams=args.teams,
            players=args.players,
        )
    return ScenarioPlan(start_ms, sensors, thresholds, vehicles, tweets, game)


def check_duration(duration_s: float | None) -> float | None:
    """Reject durations that would end the run at once or never.

    Raises:
        ConfigError: the duration is not a positive, finite number of seconds.
    """
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s > 0):
        raise ConfigError(
            f"simulator: duration must be a positive number of seconds, got {duration_s}"
        )
    return duration_s


def summary(stats: SimulationStats, config: SimulationConfig, topic: str) -> str:
    """One line that says what was sent, how fast, and how to repeat it."""
    return (
        f"simulator: sent {stats.sent:,} readings from {config.sensors} sensors to {topic!r} "
        f"in {stats.elapsed_s:.2f} s ({stats.throughput_per_s:,.0f} readings/s); "
        f"{stats.outages} outages, {stats.late:,} readings delivered late after an outage; "
        f"seed {config.seed}"
    )


def scenario_summaries(stats: RunStats, plan: ScenarioPlan, seed: int) -> list[str]:
    """One line per scenario, then the totals and the seed that repeats the run."""
    sent = {stream: stats.streams[stream].sent for stream in stats.streams}
    topic = stats.topics
    lines = []
    if plan.sensors is not None:
        lines.append(summary(stats.streams[Stream.READINGS], plan.sensors, topic[Stream.READINGS]))
    if plan.thresholds is not None:
        lines.append(
            f"simulator: sent {sent[Stream.THRESHOLDS]:,} threshold updates for "
            f"{plan.thresholds.sensors} sensors to {topic[Stream.THRESHOLDS]!r}"
        )
    if plan.vehicles is not None:
        lines.append(
            f"simulator: sent {sent[Stream.OBD]:,} OBD and {sent[Stream.APP]:,} app speed "
            f"records of {plan.vehicles.vehicles} vehicles to {topic[Stream.OBD]!r} and "
            f"{topic[Stream.APP]!r} (the app uploads 10-150 s late)"
        )
    if plan.tweets is not None:
        lines.append(
            f"simulator: sent {sent[Stream.TWEETS]:,} tweets from {plan.tweets.users} users "
            f"to {topic[Stream.TWEETS]!r}"
        )
    if plan.game is not None:
        game = stats.streams[Stream.GAME]
        lines.append(
            f"simulator: sent {game.sent:,} game events of {plan.game.teams} teams x "
            f"{plan.game.players} players to {topic[Stream.GAME]!r}; {game.outages} phones "
            f"went offline, {game.late:,} events delivered late in bursts"
        )
    lines.append(
        f"simulator: sent {stats.sent:,} records in {stats.elapsed_s:.2f} s "
        f"({stats.throughput_per_s:,.0f} records/s); seed {seed}"
    )
    return lines


async def _run(
    plan: ScenarioPlan, settings: Settings, *, pace: bool, duration_s: float | None
) -> RunStats:
    """Run :func:`produce_scenarios`; the first Ctrl-C or SIGTERM stops it gracefully,
    a second aborts."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def on_signal() -> None:
        if stop.is_set() and task is not None:
            task.cancel()
        stop.set()

    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, on_signal)
    try:
        return await produce_scenarios(
            plan,
            settings,
            pace=pace,
            duration_s=duration_s,
            progress=sys.stdout.isatty(),
            stop=stop,
        )
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


def run_cli(args: argparse.Namespace) -> int:
    """Validate the arguments, produce the scenarios' records, and print a summary.

    Returns:
        0 when the run ended (by count, duration or Ctrl-C), 130 when aborted.

    Raises:
        ConfigError: a bad argument or setting, or a missing topic, with a
            message saying which.
        BrokerUnavailableError: Kafka did not answer.
    """
    seed = secrets.randbits(SEED_BITS) if args.seed is None else args.seed
    plan = plan_from_args(args, seed=seed, now_ms=time.time_ns() // 1_000_000)
    duration_s = check_duration(args.duration)
    settings = _settings()
    if args.seed is None:
        print(f"simulator: seed {seed} (repeat this run with --seed {seed})", flush=True)
    try:
        stats = asyncio.run(_run(plan, settings, pace=not args.fast, duration_s=duration_s))
    except asyncio.CancelledError:
        return 130
    for line in scenario_summaries(stats, plan, seed):
        print(line, flush=True)
    return 0


def _settings() -> Settings:
    """The settings as the app's workers see them: the environment may hold the
    app's agent settings too, which must not be rejected as misspelt."""
    from eddy.app.loader import load_app_and_settings

    return load_app_and_settings()[1]
