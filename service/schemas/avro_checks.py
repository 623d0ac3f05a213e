"""What makes an Avro schema unsafe to decode with, found once per schema.

fastavro decodes in C, recursing once per level of a record's nesting, and
trusts the counts a record claims:

- a recursive schema lets a record nest as deep as its bytes allow: a 100 KB
  record crashed the process (SIGSEGV, the C stack), so recursion is refused;
- nesting is bounded by ``max_depth`` levels (records, arrays, maps, unions);
- an array whose items take no bytes (null, fixed(0), a record of such fields)
  lets a 17-byte record claim 2^62 items, and fastavro loops for ever building
  them (or skipping them): refused. Every other item takes a byte at least, so
  a record holds at most one item per byte;
- a decimal's bytes are turned into a ``Decimal`` in time quadratic in their
  length (a 100 KB decimal took a second): a decimal longer than its precision
  allows is refused per record (:func:`bounded_decimals`).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import fastavro.read

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})
# A decimal of more digits than this is refused whatever its precision says:
# building one of 1,000 digits takes microseconds, of 250,000 about a second.
MAX_DECIMAL_DIGITS = 1_000


class Unsafe(Exception):
    """The reason a schema is refused."""


def unsafe(parsed: Any, max_depth: int) -> str | None:
    """Why decoding with ``parsed`` (fastavro.parse_schema's) is unsafe, or None."""
    try:
        _Check(max_depth).walk(parsed, 0)
    except Unsafe as exc:
        return str(exc)
    return None


class _Check:
    """One walk of a parsed schema. fastavro writes a named type out where it is
    first used and by its full name after, so a name met while its own fields are
    being walked is a recursion."""

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.defining: list[str] = []
        self.done: dict[str, tuple[int, bool]] = {}  # name -> (levels below it, takes no bytes)

    def walk(self, schema: Any, depth: int) -> tuple[int, bool]:
        """The levels of nesting below ``schema`` and whether its values take no bytes.

        Raises:
            Unsafe: recursive, too deep, or an array of items that take no bytes.
        """
        if depth > self.max_depth:
            raise Unsafe(
                f"nested deeper than {self.max_depth} levels (EDDY_SCHEMA_REGISTRY_MAX_DEPTH)"
            )
        if isinstance(schema, str):
            return self._named(schema, depth)
        if isinstance(schema, list):  # a union: its branch's index takes a byte at least
            levels = [self.walk(branch, depth + 1)[0] for branch in schema]
            return 1 + max(levels, default=0), False
        if not isinstance(schema, dict):
            raise Unsafe(f"not an Avro schema: {schema!r:.80}")
        kind = schema.get("type")
        if kind in ("record", "error"):
            return self._record(schema, depth)
        if kind == "array":
            below, empty = self.walk(schema.get("items"), depth + 1)
            if empty:
                raise Unsafe(
                    f"an array of {_describe(schema.get('items'))}, whose items take no bytes: "
                    "a record of a few bytes could claim 2^62 of them"
                )
            return below + 1, False
        if kind == "map":
            return self.walk(schema.get("values"), depth + 1)[0] + 1, False
        if kind in ("enum", "fixed"):
            empty = kind == "fixed" and schema.get("size") == 0
            self.done[str(schema.get("name"))] = (0, empty)
            return 0, empty
        if kind in PRIMITIVES:
            return 0, kind == "null"
        return self.walk(kind, depth)  # {"type": <a schema>}

    def _named(self, name: str, depth: int) -> tuple[int, bool]:
        if name in PRIMITIVES:
            return 0, name == "null"
        if name in self.defining:
            cycle = [*self.defining[self.defining.index(name) :], name]
            raise Unsafe(f"recursive ({' -> '.join(cycle)}): a record could nest without bound")
        found = self.done.get(name)
        if found is None:
            raise Unsafe(f"type {name!r} is not defined")
        if depth + found[0] > self.max_depth:
            raise Unsafe(
                f"nested deeper than {self.max_depth} levels (EDDY_SCHEMA_REGISTRY_MAX_DEPTH)"
            )
        return found

    def _record(self, schema: dict[str, Any], depth: int) -> tuple[int, bool]:
        name = str(schema.get("name"))
        self.defining.append(name)
        fields = [self.walk(f.get("type"), depth + 1) for f in schema.get("fields") or ()]
        self.defining.pop()
        found = (1 + max((below for below, _ in fields), default=0), all(e for _, e in fields))
        self.done[name] = found
        return found


def _describe(schema: Any) -> str:
    if isinstance(schema, dict):
        name = schema.get("name")
        return f"{schema.get('type')} {name}" if name else str(schema.get("type"))
    return str(schema)


@cache
def decimal_bytes(precision: int) -> int:
    """The most bytes a decimal of ``precision`` digits takes (two's complement)."""
    digits = min(max(precision, 1), MAX_DECIMAL_DIGITS)
    return (math.ceil(digits * math.log2(10)) + 1 + 7) // 8 + 1  # + 1: a writer's padding


class DecimalTooLong(ValueError):
    """A decimal's bytes say more than its precision allows."""


def bounded_decimals() -> None:
    """Make fastavro refuse a decimal longer than its precision allows, before it
    builds the ``Decimal`` (in time quadratic in the length). fastavro looks its
    logical types' readers up in ``LOGICAL_READERS``, its documented way to
    change them; done once, for the process."""
    readers = fastavro.read.LOGICAL_READERS
    for kind in ("bytes-decimal", "fixed-decimal"):
        original = readers[kind]
        if getattr(original, "bounded", False):
            continue

        def bounded(
            data: bytes, writer_schema: Any = None, reader_schema: Any = None, read: Any = original
        ) -> Any:
            precision = writer_schema.get("precision", 0) if isinstance(writer_schema, dict) else 0
            most = decimal_bytes(precision if isinstance(precision, int) else MAX_DECIMAL_DIGITS)
            if len(data) > most:
                raise DecimalTooLong(
                    f"a decimal of {len(data)} bytes, more than precision {precision} allows "
                    f"({most} bytes, at most {MAX_DECIMAL_DIGITS} digits)"
                )
            return read(data, writer_schema, reader_schema)

        bounded.bounded = True  # type: ignore[attr-defined]
        readers[kind] = bounded
