"""A real S3-compatible server for tests (moto's server mode, tools/s3), and a
proxy in front of it that can stop a snapshot half-way."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from tests.support.processes import free_port
from tools.s3 import LocalS3
from tools.s3.server import ACCESS_KEY, HOST, REGION, SECRET_KEY


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    """One server for the session on a free port, with the bucket ``eddy``; each test
    writes under a prefix of its own."""
    with LocalS3(tmp_path_factory.mktemp("s3") / "s3.log") as server:
        yield server


def s3_filesystem(server: LocalS3) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(
        endpoint_override=server.endpoint,
        access_key=ACCESS_KEY,
        secret_key=SECRET_KEY,
        region=REGION,
    )


def upload(server: LocalS3, local: Path, prefix: str) -> str:
    """Copy a local tree to ``s3://<bucket>/<prefix>``; returns that URI."""
    pafs.copy_files(
        str(local),
        f"{server.bucket}/{prefix}",
        source_filesystem=pafs.LocalFileSystem(),
        destination_filesystem=s3_filesystem(server),
    )
    return server.uri(prefix)


# A part manifest's upload starting (a multipart upload's initiation, or a plain
# PUT), with the snapshot id it belongs to.
PART_MANIFEST = re.compile(
    rb"(?:POST /\S*/(\d{8}T\d{9}Z)/_parts/[^\s?]+\?uploads"
    rb"|PUT /\S*/(\d{8}T\d{9}Z)/_parts/[^\s?]+) HTTP/1\.1"
)


class HoldingProxy:
    """A TCP proxy to ``upstream_port`` that forwards every byte, until armed: then
    the first snapshot that starts uploading parts after that gets ``after`` part
    manifests through, and its next one is held forever (never forwarded, never
    answered), and ``held`` is set. A worker whose upload is held is stuck in the
    middle of publishing that snapshot's parts, where the test kills it. A snapshot
    that was already uploading parts when armed finishes undisturbed."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.held = threading.Event()
        self._armed_after: int | None = None
        self._seen: set[bytes] = set()  # snapshot ids whose parts went through
        self._before: set[bytes] = set()  # ... before arming
        self._target: bytes | None = None
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def arm(self, after: int) -> None:
        with self._lock:
            self._armed_after = after
            self._before = set(self._seen)

    def _should_hold(self, snapshot_id: bytes) -> bool:
        with self._lock:
            self._seen.add(snapshot_id)
            if self._armed_after is None or snapshot_id in self._before:
                return False
            if self._target is None:
                self._target = snapshot_id
            if snapshot_id != self._target:
                return False
            if self._armed_after > 0:
                self._armed_after -= 1
                return False
            return True

    def start(self) -> HoldingProxy:
        self._thread.start()
        self._started.wait(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, HOST, self.port)
        )
        self._started.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    async def _connection(self, client: asyncio.StreamReader, reply: asyncio.StreamWriter) -> None:
        upstream, forward = await asyncio.open_connection(HOST, self.upstream_port)

        async def requests() -> None:
            tail = b""
            while data := await client.read(65_536):
                # The request line may straddle two reads: look at the seam too.
                window = tail + data
                for match in PART_MANIFEST.finditer(window):
                    if match.end() <= len(tail):
                        continue  # found in the previous read already
                    if self._should_hold(match.group(1) or match.group(2)):
                        self.held.set()
                        await asyncio.Event().wait()  # until the worker dies
                forward.write(data)
                await forward.drain()
                tail = window[-200:]
            forward.close()

        async def responses() -> None:
            while data := await upstream.read(65_536):
                reply.write(data)
                await reply.drain()
            reply.close()

        try:
            await asyncio.gather(requests(), responses())
        except (ConnectionError, OSError):
            pass  # the worker was killed mid-request: what the test is about
        finally:
            forward.close()
            reply.close()
