"""Decode cost per event: a sensor reading's value bytes to a ``SensorReading``,
as JSON (the default serde) and as Avro, Protobuf and JSON Schema in the schema
registry's wire format, in one run.

Run ``python -m bench.decode`` (``--records N``, ``--repeat R``). Each serde
decodes the same readings (the simulator's, 100 sensors); the figure is CPU µs
per event (``time.process_time``), the best of ``--repeat`` rounds, the serdes
taking turns within each round so they share a stretch of the machine's load.
The registry-wire serdes are bound to a registry that holds the one schema the
records were written with: a worker asks the registry about an id once, at its
first record, so the per-event cost is the codec and the model, not HTTP.
Results go to ``bench/results/decode.json``.

Three more rows measure decoding only what an agent uses, on the benchmark's own
readings (``bench.workload``: eight fields, of which ``sensor_averages`` reads
three): the default serde, a msgspec ``Struct`` of the three fields with the
model's constraints, and ``orjson.loads`` alone (no validation at all, the floor
of any field extraction in Python).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import io
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import fastavro
import msgspec
import orjson

from bench.workload import encode
from eddy.examples.records import SensorReading
from eddy.examples.topics import SENSOR_READING_AVRO
from eddy.schemas.avro import Avro
from eddy.schemas.base import Binding
from eddy.schemas.jsonschema import JsonSchema
from eddy.schemas.protobuf import Protobuf
from eddy.schemas.registry import RegisteredSchema
from eddy.schemas.wire import header, write_indexes
from eddy.serde import JsonModel

RESULTS = Path(__file__).parent / "results" / "decode.json"
SCHEMA_ID = 1
READING_PROTO = """syntax = "proto3";
package eddy.bench;

message Reading {
  string sensor_id = 1;
  int64 timestamp_ms = 2;
  double temperature = 3;
}
"""


class OneSchema:
    """A registry that knows the one schema the benchmark's records carry."""

    url = "memory:"

    def __init__(self, schema_type: str, text: str) -> None:
        self.found = RegisteredSchema(SCHEMA_ID, schema_type, text, frozenset({"bench-value"}))

    def schema(self, schema_id: int) -> RegisteredSchema | None:
        return self.found if schema_id == SCHEMA_ID else None


class ReadingFields(msgspec.Struct, frozen=True):
    """The three fields ``sensor_averages`` reads, held to ``SensorReading``'s rules."""

    sensor_id: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    timestamp_ms: Annotated[int, msgspec.Meta(ge=0, le=2**53)]
    temperature: float


def readings(count: int) -> list[dict[str, Any]]:
    return [
        {
            "sensor_id": f"sensor_{i % 100}",
            "timestamp_ms": 1_700_000_000_000 + i * 10,
            "temperature": 20.0 + (i % 700) / 10,
        }
        for i in range(count)
    ]


def reading_pb2() -> ModuleType:
    """``Reading`` compiled by protoc (grpcio-tools), as a team's build generates it."""
    from grpc_tools import protoc

    folder = tempfile.mkdtemp(prefix="eddy-bench-proto-")
    (Path(folder) / "bench_reading.proto").write_text(READING_PROTO)
    if protoc.main(["protoc", f"-I{folder}", f"--python_out={folder}", "bench_reading.proto"]):
        raise RuntimeError("protoc failed on bench_reading.proto")
    sys.path.insert(0, folder)
    try:
        return importlib.import_module("bench_reading_pb2")
    finally:
        sys.path.remove(folder)


def contenders(
    values: list[dict[str, Any]],
) -> dict[str, tuple[Callable[[bytes], Any], list[bytes]]]:
    avro_schema = fastavro.parse_schema(SENSOR_READING_AVRO)

    def avro_bytes(value: dict[str, Any]) -> bytes:
        body = io.BytesIO()
        fastavro.schemaless_writer(body, avro_schema, value)
        return header(SCHEMA_ID) + body.getvalue()

    pb2 = reading_pb2()
    json_records = [json.dumps(v).encode() for v in values]
    avro_records = [avro_bytes(v) for v in values]
    proto_records = [
        header(SCHEMA_ID) + write_indexes([0]) + pb2.Reading(**v).SerializeToString()
        for v in values
    ]
    schema_text = json.dumps(SensorReading.model_json_schema())
    avro = Avro(SENSOR_READING_AVRO).bind(
        Binding(OneSchema("AVRO", json.dumps(SENSOR_READING_AVRO)), "bench-value", SensorReading)  # type: ignore[arg-type]
    )
    avro_dicts = Avro(SENSOR_READING_AVRO).bind(
        Binding(OneSchema("AVRO", json.dumps(SENSOR_READING_AVRO)), "bench-value", None)  # type: ignore[arg-type]
    )
    proto = Protobuf(pb2.Reading).bind(
        Binding(OneSchema("PROTOBUF", READING_PROTO), "bench-value", SensorReading)  # type: ignore[arg-type]
    )
    json_schema = JsonSchema().bind(
        Binding(OneSchema("JSON", schema_text), "bench-value", SensorReading)  # type: ignore[arg-type]
    )
    workload_records = [
        encode(v["sensor_id"], v["timestamp_ms"], v["temperature"], n) for n, v in enumerate(values)
    ]
    return {
        "json (JsonModel, the default)": (JsonModel(SensorReading).decode, json_records),
        "json, 8 fields (JsonModel)": (JsonModel(SensorReading).decode, workload_records),
        "json, 8 fields (msgspec, 3 used)": (
            msgspec.json.Decoder(ReadingFields).decode,
            workload_records,
        ),
        "json, 8 fields (orjson.loads only)": (orjson.loads, workload_records),
        "avro (fastavro + model)": (avro.decode, avro_records),
        "avro (fastavro only, dicts)": (avro_dicts.decode, avro_records),
        "protobuf (protobuf + model)": (proto.decode, proto_records),
        "json schema (jsonschema + model)": (
            json_schema.decode,
            [header(SCHEMA_ID) + r for r in json_records],
        ),
    }


def measure(records: int, repeat: int) -> dict[str, float]:
    runs = contenders(readings(records))
    best = dict.fromkeys(runs, float("inf"))
    gc.freeze()
    for _ in range(repeat):
        for name, (decode, data) in runs.items():
            started = time.process_time()
            for raw in data:
                decode(raw)
            best[name] = min(best[name], time.process_time() - started)
    return {name: seconds / records * 1e6 for name, seconds in best.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decode", description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    us = measure(args.records, args.repeat)
    baseline = us["json (JsonModel, the default)"]
    for name, cost in us.items():
        print(f"{name:<34} {cost:6.2f} µs/event  {cost / baseline:4.2f}x json")
    RESULTS.write_text(
        json.dumps({"records": args.records, "repeat": args.repeat, "us_per_event": us}, indent=2)
        + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
