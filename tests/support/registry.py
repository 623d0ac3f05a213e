"""The session's schema registry (Apicurio, built and started by tools.schemaregistry,
or the one `make registry-start` left running), and a compiled Protobuf message."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tools import schemaregistry

READING_PROTO = """syntax = "proto3";
package eddy.test;

message Reading {
  string sensor_id = 1;
  int64 timestamp_ms = 2;
  double temperature = 3;
}
"""


@pytest.fixture(scope="session")
def registry_url() -> Iterator[str]:
    started = schemaregistry.ensure_running()
    yield schemaregistry.url()
    if started:
        schemaregistry.stop()


@pytest.fixture
def registry_env(registry_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """EDDY_SCHEMA_REGISTRY_URL set for the workers this test builds."""
    monkeypatch.setenv("EDDY_SCHEMA_REGISTRY_URL", registry_url)
    return registry_url


@pytest.fixture(scope="session")
def reading_pb2(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """``Reading`` compiled by protoc (grpcio-tools) from READING_PROTO, as a team's
    build would generate it."""
    return compile_proto(tmp_path_factory.mktemp("proto"), "eddy_reading.proto", READING_PROTO)


def compile_proto(folder: Path, name: str, text: str) -> ModuleType:
    from grpc_tools import protoc

    (folder / name).write_text(text)
    code = protoc.main(["protoc", f"-I{folder}", f"--python_out={folder}", str(folder / name)])
    if code != 0:
        raise RuntimeError(f"protoc failed on {name} (exit {code})")
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name.removesuffix(".proto") + "_pb2")
    finally:
        sys.path.remove(str(folder))
