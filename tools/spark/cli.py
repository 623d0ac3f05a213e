"""``python -m tools spark fetch|package|start|stop|status``."""

from __future__ import annotations

import argparse

from eddy.cli_parser import print_json
from eddy.paths import eddy_home
from tools.spark import cluster, jars


def run(args: argparse.Namespace) -> int:
    """Exit codes: 0 done; status returns 1 when the cluster is not running."""
    action: str = args.action
    if action == "fetch":
        print(",".join(str(j) for j in jars.fetch()))
        return 0
    if action == "package":
        print(cluster.package(eddy_home() / "spark" / "eddy-jobs.zip"))
        return 0
    if action == "start":
        state = cluster.start_background()
        print(f"Spark standalone master {state.master_url} (web UI {state.ui_url})")
        return 0
    if action == "stop":
        pids = cluster.stop_background()
        print(f"stopped (pids {', '.join(map(str, pids))})" if pids else "not running")
        return 0
    if action == "status":
        state = cluster.status()
        if getattr(args, "json", False):
            print_json(
                {
                    "running": state.running,
                    "master_url": state.master_url,
                    "ui_url": state.ui_url,
                    "pids": state.pids,
                }
            )
        elif state.running:
            print(f"running: {state.master_url} (web UI {state.ui_url})")
        else:
            print("not running")
        return 0 if state.running else 1
    raise ValueError(f"unknown spark action {action!r}")  # argparse makes this unreachable
