"""``python -m service snapshot``: ask the running workers for a snapshot, or list them."""

from __future__ import annotations

import argparse
import time
from typing import Any

import httpx

from service.errors import EddyError
from service.settings import Settings
from service.snapshot.layout import SnapshotRoot


def worker_url(settings: Settings) -> str:
    host = settings.api_host if settings.api_host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    return f"http://{host}:{settings.api_port}"


def request_snapshot(url: str, settings: Settings) -> dict[str, Any]:
    """POST /snapshots to the worker at ``url``; the answer says if it is complete."""
    headers = {}
    token = settings.api_token
    if token is not None:
        headers["Authorization"] = f"Bearer {token.get_secret_value()}"
    timeout_s = settings.snapshot_timeout_ms / 1000 + 30
    try:
        response = httpx.post(f"{url}/snapshots", json={}, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise EddyError(
            f"no worker answered at {url} ({exc}): start one (make run) or pass --url"
        ) from None
    if response.status_code != 200:
        raise EddyError(f"the worker at {url} refused: {response.status_code} {response.text}")
    answer: dict[str, Any] = response.json()
    return answer


def _list(settings: Settings) -> int:
    root = SnapshotRoot.open(settings.snapshot_root)
    manifests = root.manifests(settings.app_id)
    if not manifests:
        print(f"no complete snapshot of {settings.app_id} under {root.uri}")
        return 0
    for manifest in manifests:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(manifest["created_ms"] / 1000))
        location = root.url_of(root.snapshot_dir(settings.app_id, manifest["snapshot_id"]))
        print(f"{manifest['snapshot_id']}  {created} UTC  {manifest['rows']:>10} rows  {location}")
    return 0


def run_cli(args: argparse.Namespace) -> int:
    from service.app.loader import load_app_and_settings

    _, settings = load_app_and_settings(getattr(args, "app", None))
    if args.list:
        return _list(settings)
    answer = request_snapshot(args.url or worker_url(settings), settings)
    if not answer["complete"]:
        print(
            f"snapshot {answer['snapshot_id']} is incomplete (not published): no worker "
            f"exported {', '.join(answer['missing'])}; retry once the app is rebalanced"
        )
        return 1
    print(f"snapshot {answer['snapshot_id']}: {answer['rows']} rows at {answer['location']}")
    return 0
