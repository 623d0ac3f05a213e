"""The Confluent wire format: ``0x00``, the schema id (4 bytes, big-endian), the
payload. Protobuf payloads start with the message's indexes in the .proto file
(zigzag varints: their count, then each; ``[0]`` is written as one 0 byte)."""

from __future__ import annotations

import struct

from eddy.serde import DecodeError

MAGIC = 0
HEADER_BYTES = 5
_HEADER = struct.Struct(">bI")


def split(raw: bytes | None, max_bytes: int | None = None) -> tuple[int, memoryview]:
    """The schema id and payload of a record.

    Raises:
        DecodeError: a tombstone, a wrong magic byte, fewer than 5 bytes, or more
            than ``max_bytes``.
    """
    if raw is None:
        raise DecodeError("empty value (tombstone)")
    if max_bytes is not None and len(raw) > max_bytes:
        raise DecodeError(
            f"{len(raw)} bytes, more than EDDY_SCHEMA_REGISTRY_MAX_RECORD_BYTES={max_bytes}"
        )
    if len(raw) < HEADER_BYTES:
        raise DecodeError(
            f"truncated: {len(raw)} bytes, shorter than the schema registry's 5-byte header"
        )
    magic, schema_id = _HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise DecodeError(
            f"not in the schema registry's wire format: magic byte {raw[0]:#04x}, expected 0x00"
        )
    return schema_id, memoryview(raw)[HEADER_BYTES:]


def header(schema_id: int) -> bytes:
    return _HEADER.pack(MAGIC, schema_id)


def read_indexes(payload: memoryview) -> tuple[list[int], int]:
    """Protobuf's message indexes and where the message starts in ``payload``."""
    count, at = _zigzag(payload, 0)
    if count == 0:
        return [0], at
    if not 0 < count <= len(payload) - at:
        raise DecodeError(f"the Protobuf message indexes claim {count} indexes")
    indexes = []
    for _ in range(count):
        index, at = _zigzag(payload, at)
        indexes.append(index)
    return indexes, at


def write_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"
    return b"".join(_to_zigzag(n) for n in (len(indexes), *indexes))


def _zigzag(data: memoryview, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if at >= len(data) or shift > 63:
            raise DecodeError("truncated: the Protobuf message indexes end early")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7


def _to_zigzag(n: int) -> bytes:
    value = (n << 1) ^ (n >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
