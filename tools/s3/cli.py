"""``python -m tools s3 start|stop|status``: the developer's local S3 server."""

from __future__ import annotations

import argparse
import shlex

from eddy.cli_parser import print_json
from tools import s3


def run(args: argparse.Namespace) -> int:
    """Exit codes: 0 done (start and stop are no-ops when nothing is to do); status
    returns 1 when the server is not running, so scripts can test it."""
    action: str = args.action
    if action == "start":
        state = s3.start(port=args.port, bucket=args.bucket)
        assert state.endpoint is not None
        print(f"S3 server (moto) on {state.endpoint}, bucket {state.bucket}, pid {state.pid}")
        print("Point Eddy and the Spark jobs at it with:")
        for name, value in s3.client_env(state.endpoint).items():
            print(f"  export {name}={shlex.quote(value)}")
        print(f"  export EDDY_SNAPSHOT_ROOT=s3://{state.bucket}/snapshots")
        return 0
    if action == "stop":
        pid = s3.stop()
        print(f"stopped (pid {pid})" if pid is not None else "not running")
        return 0
    if action == "status":
        state = s3.status()
        if getattr(args, "json", False):
            print_json(
                {
                    "running": state.running,
                    "pid": state.pid,
                    "endpoint": state.endpoint,
                    "bucket": state.bucket,
                    "log": str(state.log),
                }
            )
        elif state.running:
            print(f"running: {state.endpoint}, bucket {state.bucket}, pid {state.pid}")
        else:
            print(f"not running (log: {state.log})")
        return 0 if state.running else 1
    raise ValueError(f"unknown s3 action {action!r}")  # argparse makes this unreachable
