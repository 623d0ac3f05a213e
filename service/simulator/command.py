"""``python -m service simulate``: arguments in, a summary out.

Every run prints its seed, so any run, including one that exposed a bug, can
be repeated exactly with ``--seed``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import secrets
import signal
import sys
import time

from service.errors import ConfigError
from service.settings import Settings, load_settings
from service.simulator.generator import SimulationConfig
from service.simulator.producer import SimulationStats, produce

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


async def _run(
    config: SimulationConfig, settings: Settings, *, pace: bool, duration_s: float | None
) -> SimulationStats:
    """Run :func:`produce`; the first Ctrl-C or SIGTERM stops it gracefully, a second aborts."""
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
        return await produce(
            config,
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
    """Validate the arguments, produce the readings, and print a summary.

    Returns:
        0 when the run ended (by count, duration or Ctrl-C), 130 when aborted.

    Raises:
        ConfigError: a bad argument or setting, with a message saying which.
        BrokerUnavailableError: Kafka did not answer.
    """
    seed = secrets.randbits(SEED_BITS) if args.seed is None else args.seed
    config = config_from_args(args, seed=seed, now_ms=time.time_ns() // 1_000_000)
    duration_s = check_duration(args.duration)
    settings = load_settings()
    if args.seed is None:
        print(f"simulator: seed {seed} (repeat this run with --seed {seed})", flush=True)
    try:
        stats = asyncio.run(_run(config, settings, pace=not args.fast, duration_s=duration_s))
    except asyncio.CancelledError:
        return 130
    print(summary(stats, config, settings.readings_topic), flush=True)
    return 0
