"""Kafka keys are text: a key that is not valid UTF-8 goes to the dead-letter
topic with the reason, never read with its bad bytes replaced (two such keys
would become one key's state). Keys read by a key serde become text the same
way; none raises anything but a dead letter."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from eddy import Avro, DecodeError
from eddy.pipeline.source import Source, as_key
from eddy.schemas.base import Binding
from eddy.schemas.memory import MemoryRegistry
from eddy.serde import Json, JsonModel


class Click(BaseModel):
    user: str


class Record:
    def __init__(self, key: bytes | None, value: bytes | None = b'{"user": "ann"}') -> None:
        self.key, self.value = key, value
        self.topic, self.partition, self.offset, self.timestamp, self.headers = "t", 0, 7, 0, ()


class Letters:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def dead_letter(self, record: Any, reason: str) -> None:
        self.reasons.append(reason)


def read(source: Source, key: bytes | None, value: bytes | None = b'{"user": "ann"}') -> Any:
    letters = Letters()
    found = source.read(Record(key, value), letters)  # type: ignore[arg-type]
    return found.elements[0][0] if found is not None else letters.reasons


KAFKA_KEYED = Source("clicks", Json(), require_key=True)


def test_a_key_that_is_not_utf8_is_dead_lettered_naming_the_problem() -> None:
    assert read(KAFKA_KEYED, b"ann") == "ann"
    assert read(KAFKA_KEYED, "zoë".encode()) == "zoë"
    assert read(KAFKA_KEYED, b"ann\xff") == [
        "key: not UTF-8 text (invalid start byte at byte 3: b'\\xff'); Eddy keys records by "
        "text and never patches a key (two keys would merge): give the topic a key_serde "
        "that reads these keys"
    ]


def test_two_keys_that_differ_in_bad_bytes_are_not_merged() -> None:
    first, second = read(KAFKA_KEYED, b"id-\x80"), read(KAFKA_KEYED, b"id-\x81")
    assert isinstance(first, list)
    assert isinstance(second, list)
    assert "invalid start byte at byte 3: b'\\x80'" in first[0]
    assert "invalid start byte at byte 3: b'\\x81'" in second[0]


@given(key=st.binary(max_size=12))
def test_any_key_is_its_exact_text_or_a_dead_letter(key: bytes) -> None:
    found = read(KAFKA_KEYED, key)
    try:
        text = key.decode()
    except UnicodeDecodeError:
        assert found[0].startswith("key: not UTF-8 text (")
    else:
        assert found == text


def test_a_value_keyed_topic_shows_a_foreign_key_as_its_bytes() -> None:
    keyed = Source("clicks", JsonModel(Click), record_key=lambda c: c.user)
    assert read(keyed, b"ann") == "ann"
    assert read(keyed, b"\xffann") == [
        "record key \"b'\\\\xffann'\" is not its value's key 'ann': topic clicks is declared "
        "keyed by it, and a record in another key's partition would split that key's state"
    ]


@pytest.fixture
def registry() -> MemoryRegistry:
    return MemoryRegistry()


def key_serde(registry: MemoryRegistry, schema: Any) -> Any:
    bound = Avro(schema).bind(Binding(registry, "clicks-key", None))
    bound.prepare()
    return bound


def test_an_avro_bytes_key_is_its_utf8_text_or_a_dead_letter(registry: MemoryRegistry) -> None:
    serde = key_serde(registry, '"bytes"')
    source = Source("clicks", Json(), key_serde=serde)
    assert read(source, serde.encode(b"ann")) == "ann"
    assert read(source, serde.encode(b"\xfe\xff")) == [
        "key: not UTF-8 text (invalid start byte at byte 0: b'\\xfe\\xff'); Eddy keys records by "
        "text and never patches a key (two keys would merge): give the topic a key_serde that "
        "reads these keys"
    ]


def test_an_avro_record_key_is_its_canonical_json(registry: MemoryRegistry) -> None:
    schema = {
        "type": "record",
        "name": "Key",
        "fields": [
            {"name": "id", "type": "bytes"},
            {"name": "n", "type": "long"},
            {
                "name": "price",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
            },
        ],
    }
    serde = key_serde(registry, schema)
    source = Source("clicks", Json(), key_serde=serde)
    key = read(source, serde.encode({"n": 2, "id": b"\x00\xff", "price": Decimal("1.50")}))
    assert json.loads(key) == {"id": "\x00\xff", "n": 2, "price": "1.50"}
    assert key == as_key({"price": Decimal("1.50"), "n": 2, "id": b"\x00\xff"})


def test_a_key_of_something_json_cannot_hold_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="a key of dict Eddy cannot key by"):
        as_key({"when": object()})
    assert as_key({1: "a", "b": [1.5]}) == '{"1":"a","b":[1.5]}'
