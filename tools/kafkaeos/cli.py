"""``python -m tools eos-kafka``: Kafka's exactly-once system test against Eddy
(``make eos-kafka``; docs/chaos.md).

Only argparse at import time: the harness loads when the command runs.
"""

from __future__ import annotations

import argparse
import asyncio

EPILOG = """examples:
  python -m tools eos-kafka                               Kafka 3.9.2, the local broker
  python -m tools eos-kafka --kafka 4.2.1 --brokers 1     a one-node 4.2.1 cluster on :19092
  python -m tools eos-kafka --brokers 3 --leader-kills 2  three brokers, leaders killed
  python -m tools eos-kafka --brokers 3 --client streams  Kafka Streams (positive control)
  python -m tools eos-kafka --fleet --worker-cuts 1 --leader-isolations 1
                                                          hosts of their own (root), an
                                                          instance and a leader cut off
  python -m tools eos-kafka --guarantee at_least_once --bounces 1 \\
      --commit-interval-ms 2000 --expect-failure          the negative control
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--kafka", default="3.9.2", help="Kafka version of broker and test jar")
    parser.add_argument(
        "--brokers", type=int, default=0,
        help="0: the local broker on :9092 (its version must be --kafka); "
        "N: a cluster of N brokers of --kafka on :19092.. started for the run",
    )  # fmt: skip
    parser.add_argument("--duration", type=float, default=90.0, help="seconds the driver produces")
    parser.add_argument("--bounces", type=int, default=6, help="bounces: hard, clean, hard...")
    parser.add_argument(
        "--leader-kills", type=int, default=0, help="kill -9 of a partition leader (cluster only)"
    )
    parser.add_argument(
        "--client", choices=["eddy", "streams"], default="eddy",
        help="the application under test: eddy (Eddy's workers) or streams (Kafka Streams' "
        "EosTestClient, "
        "the positive control; needs --brokers 3)",
    )  # fmt: skip
    parser.add_argument(
        "--guarantee", choices=["exactly_once", "at_least_once"], default="exactly_once",
        help="the Eddy workers' EDDY_PROCESSING_GUARANTEE: exactly_once, or at_least_once "
        "(the negative control)",
    )  # fmt: skip
    parser.add_argument(
        "--expect-failure", action="store_true",
        help="negative control: succeed only if the verifier fails",
    )  # fmt: skip
    parser.add_argument(
        "--commit-interval-ms", type=int, default=100,
        help="the Eddy workers' EDDY_COMMIT_INTERVAL_MS (the negative control: 2000, so a "
        "kill -9 always leaves sent but uncommitted records behind)",
    )  # fmt: skip
    parser.add_argument(
        "--fleet", action="store_true",
        help="3 brokers and the 3 instances each in a network namespace of its own (root; "
        "docs/chaos.md); the driver and verifier reach them over a bridge",
    )  # fmt: skip
    parser.add_argument(
        "--worker-cuts", type=int, default=0,
        help="cut an instance's host from the brokers for 15-20 s, past its session (6 s) "
        "and transaction (10 s) timeouts, then heal (--fleet only)",
    )  # fmt: skip
    parser.add_argument(
        "--leader-isolations", type=int, default=0,
        help="cut the broker leading a partition of echo from the other brokers for "
        "10-15 s, then rejoin (--fleet only)",
    )  # fmt: skip
    parser.add_argument(
        "--seed", type=int, default=1, help="which leaders and instances the faults hit"
    )


def run_cli(args: argparse.Namespace) -> int:
    import logging

    from tools.fleet.errors import FleetError
    from tools.kafkaeos.suite import run_one

    # A line per readiness probe and aiokafka's errors while brokers are killed by
    # design would bury the run's own lines; the verifier judges the outcome.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)

    try:
        result = asyncio.run(run_one(args))
    except FleetError as exc:  # no root, no iproute2: say so, never skip
        print(f"eos-kafka: {exc}", flush=True)
        return 1
    passed = result.passed != args.expect_failure
    for line in result.summary():
        print(line, flush=True)
    if args.expect_failure:
        outcome = "negative control holds" if passed else "NEGATIVE CONTROL PASSED VERIFICATION"
        print(f"  {outcome}: the verifier {'failed' if not result.passed else 'passed'}")
    return 0 if passed else 1
