"""The exactly-once chaos harness (docs/chaos.md).

``python -m tools chaos`` seeds sequenced records, runs worker processes with
exactly-once on, injects seeded faults (kill -9, SIGTERM, zombies, rebalances,
broker kill, wiped state, kill during restore), drains, and verifies every output
against an offline recomputation. This package imports nothing at import time so
the CLI's ``--help`` stays fast.
"""
