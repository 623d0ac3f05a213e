"""Byte encodings for state keys and values.

Keys are big-endian and length-prefixed so RocksDB's byte order is the logical
order: all windows of one sensor are adjacent and sorted by start time, and
timers sort by time first. Signed times are offset by 2**63 so that negative
timestamps sort before positive ones.
"""

from __future__ import annotations

import struct
from typing import Any

import orjson

from eddy.eventtime import Timer, TimeWindow
from eddy.serde import encode_json as encode_value

_TIME = struct.Struct(">Q")
_TWO_TIMES = struct.Struct(">QQ")
_BIAS = 2**63


def encode_time(time_ms: int) -> bytes:
    return _TIME.pack(time_ms + _BIAS)


def time_upper_bound(time_ms: int) -> bytes | None:
    """The exclusive upper bound of keys that start with a time at or before
    ``time_ms``; None when every time is (the end of input's watermark)."""
    return None if time_ms >= 2**63 - 1 else encode_time(time_ms + 1)


def decode_time(raw: bytes) -> int:
    return int(_TIME.unpack(raw)[0]) - _BIAS


def encode_str(value: str) -> bytes:
    raw = value.encode()
    if len(raw) > 0xFFFF:
        raise ValueError("keys are limited to 65535 bytes")
    return len(raw).to_bytes(2, "big") + raw


def decode_str(raw: bytes, at: int = 0) -> tuple[str, int]:
    size = int.from_bytes(raw[at : at + 2], "big")
    end = at + 2 + size
    return raw[at + 2 : end].decode(), end


def encode_window_key(key: tuple[str, TimeWindow]) -> bytes:
    name, (start_ms, end_ms) = key
    return encode_str(name) + _TWO_TIMES.pack(start_ms + _BIAS, end_ms + _BIAS)


def decode_window_key(raw: bytes) -> tuple[str, TimeWindow]:
    name, at = decode_str(raw)
    start, end = _TWO_TIMES.unpack_from(raw, at)
    return name, TimeWindow(start - _BIAS, end - _BIAS)


def encode_window_first(key: tuple[TimeWindow, str]) -> bytes:
    """``(window, key)``, window first: every key of one window is adjacent."""
    (start_ms, end_ms), name = key
    return _TWO_TIMES.pack(start_ms + _BIAS, end_ms + _BIAS) + encode_str(name)


def decode_window_first(raw: bytes) -> tuple[TimeWindow, str]:
    start, end = _TWO_TIMES.unpack_from(raw, 0)
    name, _ = decode_str(raw, 16)
    return TimeWindow(start - _BIAS, end - _BIAS), name


def window_prefix(window: TimeWindow) -> bytes:
    return _TWO_TIMES.pack(window.start_ms + _BIAS, window.end_ms + _BIAS)


def window_key_range(name: str, from_ms: int, to_ms: int) -> tuple[bytes, bytes]:
    """Byte bounds of the windows of ``name`` whose start is in ``[from_ms, to_ms)``."""
    prefix = encode_str(name)
    return prefix + encode_time(from_ms), prefix + encode_time(to_ms)


def key_prefix(name: str) -> bytes:
    return encode_str(name)


def encode_timer(timer: Timer) -> bytes:
    return (
        encode_time(timer.time_ms)
        + encode_str(timer.namespace)
        + encode_str(timer.key)
        + _TWO_TIMES.pack(timer.window_start_ms + _BIAS, timer.window_end_ms + _BIAS)
    )


def decode_timer(raw: bytes) -> Timer:
    time_ms = decode_time(raw[:8])
    namespace, at = decode_str(raw, 8)
    key, at = decode_str(raw, at)
    start, end = _TWO_TIMES.unpack_from(raw, at)
    return Timer(time_ms, namespace, key, start - _BIAS, end - _BIAS)


def encode_json(value: Any) -> bytes:
    """A state value as JSON (pydantic models as their JSON form, read back as the
    model by whoever knows the type: a descriptor, a window stage's reviver).

    Raises:
        EncodeError: the value holds NaN or an infinity, an overflow most likely;
            orjson would store ``null`` and the state would be lost in silence.
            The record that caused it fails instead, and is retried, then
            dead-lettered with this reason.
    """
    return encode_value(value)


def decode_json(raw: bytes) -> Any:
    return orjson.loads(raw)


def encode_utf8(value: str) -> bytes:
    return value.encode()


def decode_utf8(raw: bytes) -> str:
    return raw.decode()


def encode_empty(_: Any) -> bytes:
    return b""


def decode_empty(_: bytes) -> bool:
    return True
