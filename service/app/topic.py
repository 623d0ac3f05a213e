"""A topic as an agent sees it: its name, the type of its values, its key and
its event time.

``Topic("clicks", Click, key="user", timestamp="ts_ms")`` says that the records
of ``clicks`` are ``Click`` values in JSON, that producers key them by the
value's ``user`` (so one user's clicks are in one partition), and that a click
happened at its ``ts_ms``. Declaring the key is a promise Eddy checks: a record
whose Kafka key is not its value's key goes to the dead-letter topic rather
than splitting a key's state over two tasks. Names are what the code says;
``EDDY_TOPIC_PREFIX`` goes in front of every one on the broker.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic

from pydantic import BaseModel
from typing_extensions import TypeVar

from eddy.eventtime.functions import field as accessor
from eddy.serde import Json, JsonModel, Serde

V = TypeVar("V", default=Any)  # a topic without a model holds any JSON
TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")
KeySpec = str | Callable[[Any], str]
TimeSpec = str | Callable[[Any], int]


@dataclass(frozen=True, eq=False)
class Topic(Generic[V]):
    """A Kafka topic and how to read its records.

    Attributes:
        name: the topic's name, before ``EDDY_TOPIC_PREFIX``.
        value: the pydantic model of its values (None: any JSON).
        key: what producers key records by: a field of the value, or a function
            of it. None: the records' keys mean nothing to Eddy.
        timestamp: the event time in ms: a field of the value, or a function of
            it. None: the Kafka record's timestamp.
        partitions: partitions when Eddy creates it (None: ``EDDY_PARTITIONS``).
        serde: how bytes become values (default: JSON validated by ``value``);
            ``Avro``, ``Protobuf`` or ``JsonSchema`` for a schema registry's.
        key_serde: how Kafka keys are read and written (default: UTF-8 text).
            A key that decodes to a str is the record's key; another value is
            keyed by its canonical JSON.
        config: topic configs when Eddy creates it (``retention.ms``...).
        kafka_key: producers key records by something their values do not hold
            (another framework's topic: a Java producer's String keys next to
            Integer values, say): each record's key is its Kafka key, read as
            UTF-8, and a record without one goes to the dead-letter topic.
            Excludes ``key``.
    """

    name: str
    value: type[V] | None = None
    key: KeySpec | None = None
    timestamp: TimeSpec | None = None
    partitions: int | None = None
    serde: Serde[V] | None = None
    key_serde: Serde[Any] | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    kafka_key: bool = False

    def __post_init__(self) -> None:
        if self.kafka_key and self.key is not None:
            raise ValueError(f"topic {self.name}: give key= or kafka_key=True, not both")
        if not TOPIC_NAME.match(self.name):
            raise ValueError(f"topic name {self.name!r}: use 1-200 of A-Z a-z 0-9 . _ -")
        if self.partitions is not None and not 1 <= self.partitions <= 10_000:
            raise ValueError(f"topic {self.name}: partitions must be 1..10000")
        for what, spec in (("key", self.key), ("timestamp", self.timestamp)):
            if isinstance(spec, str):
                self._check_field(what, spec)

    def _check_field(self, what: str, name: str) -> None:
        model = self.value
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return
        if name not in model.model_fields:
            close = difflib.get_close_matches(name, list(model.model_fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"topic {self.name}: {what} {name!r} is not a field of {model.__name__}{hint}"
            )

    @property
    def codec(self) -> Serde[Any]:
        if self.serde is not None:
            return self.serde
        model = self.value
        if isinstance(model, type) and issubclass(model, BaseModel):
            return JsonModel(model)
        return Json()

    @property
    def key_of(self) -> Callable[[Any], str] | None:
        return None if self.key is None else accessor(self.key)

    @property
    def timestamp_of(self) -> Callable[[Any], int] | None:
        return None if self.timestamp is None else accessor(self.timestamp)

    @property
    def keyed(self) -> bool:
        """Whether producers key its records, by a key Eddy can read."""
        return self.key is not None or self.kafka_key

    @property
    def key_field(self) -> str | None:
        """The key's field name, if the key is a field."""
        return self.key if isinstance(self.key, str) else None

    def __repr__(self) -> str:
        return f"Topic({self.name!r})"
