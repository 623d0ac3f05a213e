"""Kafka's binary serdes (``StringSerializer``, ``IntegerSerializer``,
``LongSerializer``), as Eddy topics read and write values.

Kafka's Java clients write an ``Integer`` as 4 big-endian bytes and a ``Long``
as 8; a topic another framework writes is read with the same bytes, or a
verifier reading it with Kafka's deserializers sees garbage.
"""

from __future__ import annotations

from eddy import DecodeError, EncodeError


class KafkaInteger:
    """``org.apache.kafka.common.serialization.IntegerSerializer``: 4 bytes, signed."""

    size = 4

    def decode(self, raw: bytes | None) -> int:
        if raw is None or len(raw) != self.size:
            raise DecodeError(f"not a {self.size}-byte Kafka integer: {raw!r}")
        return int.from_bytes(raw, "big", signed=True)

    def encode(self, value: int) -> bytes:
        try:
            return value.to_bytes(self.size, "big", signed=True)
        except OverflowError:
            raise EncodeError(f"{value} does not fit {self.size * 8} bits") from None


class KafkaLong(KafkaInteger):
    """``LongSerializer``: 8 bytes, signed."""

    size = 8
