"""The CLI's side of the REST API: requests to a worker, and long operations
started and followed until they end (``POST`` answers 202 with a Location)."""

from __future__ import annotations

import time
from typing import Any

import httpx

from eddy.errors import EddyError
from eddy.settings import Settings

POLL_S = 0.2


def worker_url(settings: Settings) -> str:
    host = settings.api_host if settings.api_host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    return f"http://{host}:{settings.api_port}"


class WorkerClient:
    """Requests to one worker's API, with the app's token."""

    def __init__(self, url: str, settings: Settings) -> None:
        self.url = url
        self._settings = settings
        token = settings.api_token
        self._headers = {"Authorization": f"Bearer {token.get_secret_value()}"} if token else {}

    def request(self, method: str, path: str, body: Any = None, timeout_s: float = 30.0) -> Any:
        """The answer's JSON.

        Raises:
            EddyError: no worker answered, or it refused (its problem's detail).
        """
        try:
            response = httpx.request(
                method, f"{self.url}{path}", json=body, headers=self._headers, timeout=timeout_s
            )
        except httpx.HTTPError as exc:
            raise EddyError(
                f"no worker answered at {self.url} ({exc}): start one (make run) or pass --url"
            ) from None
        if response.status_code >= 400:
            raise EddyError(f"the worker at {self.url} refused: {_detail(response)}")
        return response.json()

    def run(self, path: str, body: Any = None, *, gone_is_done: bool = False) -> dict[str, Any]:
        """Start a long operation and wait for it: its result.

        Args:
            gone_is_done: a worker that stops answering ended the operation (a stop).

        Raises:
            EddyError: it failed (with why), or took longer than the snapshot timeout.
        """
        operation = self.request("POST", path, body)
        deadline = time.monotonic() + self._settings.snapshot_timeout_ms / 1000 + 60
        while operation["status"] == "running":
            if time.monotonic() > deadline:
                raise EddyError(f"operation {operation['operation_id']} is still running")
            time.sleep(POLL_S)
            try:
                operation = self.request("GET", f"/operations/{operation['operation_id']}")
            except EddyError:
                if gone_is_done:
                    return {"worker_gone": True}
                raise
        if operation["status"] == "failed":
            raise EddyError(f"{operation['kind']} failed: {operation['error']}")
        result: dict[str, Any] = operation["result"]
        return result


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"{response.status_code} {response.text[:200]}"
    detail = body.get("detail") if isinstance(body, dict) else None
    return f"{response.status_code} {detail or body}"


def request_snapshot(url: str, settings: Settings) -> dict[str, Any]:
    """Take a snapshot through the worker at ``url``: the operation's result."""
    return WorkerClient(url, settings).run("/snapshots")
