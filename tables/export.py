"""Reading a partition's RocksDB checkpoint as Arrow record batches, one table at a time.

Every table is exported with one schema (:func:`schema`), so Spark reads any
table, a snapshot diff compares any two, and a new table needs no exporter:

* ``key``: the record key (a sensor, a vehicle, a hashtag...), decoded;
* ``window_start_ms``/``window_end_ms``: the window, for window-keyed tables;
* ``value``: the stored value as JSON text (most tables already store JSON, so
  this is a copy, not a decode);
* ``raw_key``: the encoded key inside the table: the identity of a row.

Keys of one table are adjacent in RocksDB (they share the table's prefix), so a
single ordered scan yields each table's batches in turn with bounded memory.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import orjson
from rocksdict import AccessType, Options, Rdict

from eddy.tables.codecs import decode_timer, decode_window_first

if TYPE_CHECKING:
    import pyarrow as pa

# Bumped when schema() or the meaning of a column changes; readers check it.
SCHEMA_VERSION = 1


@cache
def schema() -> pa.Schema:
    """The columns of every exported table."""
    # pyarrow is imported on the first export, not with the module: it costs every
    # worker process about 50 MB of memory, and only snapshots and savepoints use it.
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("key", pa.string(), nullable=False),
            pa.field("window_start_ms", pa.int64()),
            pa.field("window_end_ms", pa.int64()),
            pa.field("value", pa.string()),
            pa.field("raw_key", pa.binary(), nullable=False),
        ]
    )


BATCH_ROWS = 65_536

# (key, window_start_ms, window_end_ms, value JSON), text as UTF-8 bytes: the batch
# converts whole columns to strings at once, much faster than per row.
Row = tuple[bytes, int | None, int | None, bytes | None]
Decoder = Callable[[bytes, bytes], Row]

# Table names say how a table is keyed (the same rules as tables/catalog.py):
# window state may carry a prefix (``<prefix>windows``), keyed state is ``state.*``.
_WINDOW_KEYED_SUFFIXES = (".windows", ".results", ".expires_at")
_BY_KEY_SUFFIXES = ("keystate", "sessions", ".per_key")
_TWO_TIMES = struct.Struct(">QQ")
_BIAS = 2**63


def _window_keyed(raw_key: bytes, raw_value: bytes) -> Row:
    # eddy.tables.codecs.decode_window_key, inlined: this runs once per exported row.
    end = 2 + ((raw_key[0] << 8) | raw_key[1])
    start_ms, end_ms = _TWO_TIMES.unpack_from(raw_key, end)
    return raw_key[2:end], start_ms - _BIAS, end_ms - _BIAS, raw_value


def _window_first(raw_key: bytes, raw_value: bytes) -> Row:
    window, key = decode_window_first(raw_key)
    return key.encode(), window.start_ms, window.end_ms, raw_value


def _timer(raw_key: bytes, raw_value: bytes) -> Row:
    timer = decode_timer(raw_key)
    value = {"time_ms": timer.time_ms, "namespace": timer.namespace}
    return timer.key.encode(), timer.window_start_ms, timer.window_end_ms, orjson.dumps(value)


def _json_by_str(raw_key: bytes, raw_value: bytes) -> Row:
    return raw_key, None, None, raw_value


def _opaque(raw_key: bytes, raw_value: bytes) -> Row:
    # A table this version does not know: keep it, losslessly, rather than drop it.
    encoded = base64.b64encode(raw_value).decode()
    return raw_key.hex().encode(), None, None, orjson.dumps({"base64": encoded})


def decoder_for(table: str) -> Decoder:
    """How rows of ``table`` become :func:`schema` columns."""
    if table in ("results", "windows") or table.endswith(_WINDOW_KEYED_SUFFIXES):
        return _window_keyed
    if table == "results.by_window" or table.endswith(".by_window"):
        return _window_first
    if "timers" in table or table.endswith("expiry"):
        return _timer
    if table == "meta" or table.startswith("state.") or table.endswith(_BY_KEY_SUFFIXES):
        return _json_by_str
    return _opaque


def _batch(rows: list[Row], raw_keys: list[bytes]) -> pa.RecordBatch:
    import pyarrow as pa  # loaded by schema() already

    keys, starts, ends, values = zip(*rows, strict=True) if rows else ((), (), (), ())
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()).cast(pa.string()),  # validates UTF-8
            pa.array(starts, pa.int64()),
            pa.array(ends, pa.int64()),
            pa.array(values, pa.binary()).cast(pa.string()),
            pa.array(raw_keys, pa.binary()),
        ],
        schema=schema(),
    )


def read_checkpoint(
    path: Path, batch_rows: int = BATCH_ROWS
) -> Iterator[tuple[str, pa.RecordBatch]]:
    """``(table name, batch)`` for every table of the checkpoint at ``path``, table by
    table, in key order. Local bookkeeping (the changelog offset) is not a table."""
    db = Rdict(str(path), Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        table, prefix, skip = "", b"\x00", 1  # bookkeeping: the empty table name
        decode: Decoder = _opaque
        rows: list[Row] = []
        raw_keys: list[bytes] = []
        append, append_key = rows.append, raw_keys.append
        for full_key, raw_value in cast(Iterator[tuple[bytes, bytes]], db.items()):
            if not full_key.startswith(prefix):  # the next table begins
                if rows:
                    yield table, _batch(rows, raw_keys)
                skip = 1 + full_key[0]
                prefix, table = full_key[:skip], full_key[1:skip].decode()
                decode, rows, raw_keys = decoder_for(table), [], []
                append, append_key = rows.append, raw_keys.append
            if skip == 1:
                continue  # bookkeeping is not a table
            raw_key = full_key[skip:]
            append(decode(raw_key, raw_value))
            append_key(raw_key)
            if len(rows) >= batch_rows:
                yield table, _batch(rows, raw_keys)
                rows, raw_keys = [], []
                append, append_key = rows.append, raw_keys.append
        if rows:
            yield table, _batch(rows, raw_keys)
    finally:
        db.close()


def raw_value(table: str, value: str | None) -> bytes:
    """The stored bytes of an exported row's ``value``: the inverse of the export,
    so a savepoint made of these files restores byte for byte."""
    decode = decoder_for(table)
    if decode is _timer:
        return b""  # timers keep everything in the key (eddy.tables.codecs.encode_empty)
    if value is None:
        raise ValueError(f"a row of table {table!r} has no value")
    if decode is _opaque:
        return base64.b64decode(orjson.loads(value)["base64"])
    return value.encode()


def keyed_by_record_key(table: str) -> bool:
    """Whether a table's ``key`` column is the record key (so rows can move to the
    partition of their key). ``meta``, broadcast state (a copy in every partition)
    and unknown tables belong to their partition."""
    per_partition = table == "meta" or table.startswith("state.broadcast.")
    return decoder_for(table) is not _opaque and not per_partition


def value_of(row: dict[str, Any]) -> Any:
    """A row's value, decoded (for readers that want Python objects)."""
    text = row.get("value")
    return None if text is None else orjson.loads(text)
