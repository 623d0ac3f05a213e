"""Where a run's brokers come from: the local broker on 9092, a cluster started
for the run (another version, or three brokers), or a fleet of hosts (three
brokers and three instances, each in a network namespace of its own); whatever
was started is stopped after the run."""

from __future__ import annotations

import argparse
import asyncio

from rich.console import Console

from tools import localkafka
from tools.kafkaeos.run import EosKafkaRun, RunConfig, RunResult
from tools.localkafka.cluster import Brokers
from tools.localkafka.config import BOOTSTRAP, KafkaVersion


async def run_one(args: argparse.Namespace) -> RunResult:
    usage_error = _usage_error(args)
    if usage_error:
        raise SystemExit(f"eos-kafka: {usage_error}")
    version = KafkaVersion.parse(args.kafka)
    if args.fleet:
        return await _on_fleet(args, version)
    brokers = Brokers(version, args.brokers) if args.brokers else None
    try:
        return await _run(args, version, brokers)
    finally:
        if brokers is not None:
            await asyncio.to_thread(brokers.wipe)


def _usage_error(args: argparse.Namespace) -> str | None:
    """Why the arguments cannot make a run, in one line; None if they can."""
    if args.fleet and args.brokers:
        return "--fleet brings its own 3 brokers: drop --brokers"
    if not args.fleet and (args.worker_cuts or args.leader_isolations):
        return "--worker-cuts and --leader-isolations cut links between hosts: add --fleet"
    return None


async def _on_fleet(args: argparse.Namespace, version: KafkaVersion) -> RunResult:
    from tools.fleet.hosts import BROKERS, Fleet

    fleet = Fleet(version=version)
    result: RunResult | None = None
    try:
        print(
            f"fleet {fleet.tag}: {BROKERS} Kafka {version} brokers on {fleet.bootstrap}, "
            f"instances on {', '.join(h.kafka_ip for h in fleet.network.workers)}",
            flush=True,
        )
        bootstrap = await asyncio.to_thread(fleet.start)
        config = _config(args, version, bootstrap, BROKERS)
        result = await EosKafkaRun(config, fleet=fleet).execute(lambda m: print(m, flush=True))
        return result
    finally:
        failed = result is None or not result.passed
        await asyncio.to_thread(fleet.close, failed)
        if failed:
            print(f"the brokers' logs and data: {fleet.brokers.home}", flush=True)


async def _run(
    args: argparse.Namespace, version: KafkaVersion, brokers: Brokers | None
) -> RunResult:
    if brokers is None:
        _check_local_broker(version)
        bootstrap = BOOTSTRAP
    else:
        print(f"starting {args.brokers} Kafka {version} broker(s) in {brokers.home}", flush=True)
        bootstrap = await asyncio.to_thread(brokers.start)
    config = _config(args, version, bootstrap, args.brokers or 1)
    return await EosKafkaRun(config, brokers).execute(lambda m: print(m, flush=True))


def _config(
    args: argparse.Namespace, version: KafkaVersion, bootstrap: str, replication: int
) -> RunConfig:
    return RunConfig(
        version=version,
        bootstrap=bootstrap,
        replication=replication,
        duration_s=args.duration,
        bounces=args.bounces,
        leader_kills=args.leader_kills,
        guarantee=args.guarantee,
        client=args.client,
        commit_interval_ms=args.commit_interval_ms,
        seed=args.seed,
        fleet=args.fleet,
        worker_cuts=args.worker_cuts,
        leader_isolations=args.leader_isolations,
    )


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
