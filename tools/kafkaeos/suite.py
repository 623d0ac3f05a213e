"""Where a run's brokers come from: the local broker on 9092, or a cluster
started for the run (another version, or three brokers) and stopped after it."""

from __future__ import annotations

import argparse
import asyncio

from rich.console import Console

from tools import localkafka
from tools.kafkaeos.run import EosKafkaRun, RunConfig, RunResult
from tools.localkafka.cluster import Brokers
from tools.localkafka.config import BOOTSTRAP, KafkaVersion


async def run_one(args: argparse.Namespace) -> RunResult:
    version = KafkaVersion.parse(args.kafka)
    brokers = Brokers(version, args.brokers) if args.brokers else None
    try:
        return await _run(args, version, brokers)
    finally:
        if brokers is not None:
            await asyncio.to_thread(brokers.wipe)


async def _run(
    args: argparse.Namespace, version: KafkaVersion, brokers: Brokers | None
) -> RunResult:
    if brokers is None:
        _check_local_broker(version)
        bootstrap = BOOTSTRAP
    else:
        print(f"starting {args.brokers} Kafka {version} broker(s) in {brokers.home}", flush=True)
        bootstrap = await asyncio.to_thread(brokers.start)
    config = RunConfig(
        version=version,
        bootstrap=bootstrap,
        replication=args.brokers or 1,
        duration_s=args.duration,
        bounces=args.bounces,
        leader_kills=args.leader_kills,
        guarantee=args.guarantee,
        client=args.client,
        commit_interval_ms=args.commit_interval_ms,
        seed=args.seed,
    )
    return await EosKafkaRun(config, brokers).execute(lambda m: print(m, flush=True))


def _check_local_broker(version: KafkaVersion) -> None:
    """The local broker, started if need be, must run the test jar's version."""
    console = Console(stderr=True)
    localkafka.ensure_running(console=console)
    running = localkafka.status().version
    if running != str(version):
        raise SystemExit(
            f"eos-kafka: the local broker runs Kafka {running}, not {version}: "
            "add --brokers 1 to start a cluster of that version on :19092"
        )
