"""Typed keyed state: a descriptor names a state and declares its value type.

A function asks its context for a state by descriptor, ``ctx.state(LAST_TEMP)``,
and gets a handle bound to the current key that reads values of the declared
type back (a pydantic model comes back as the model, not a dict). A value is
checked when it is written: one the type does not accept fails at that call,
with the state's name and the reason, in the user's test rather than at a
commit in production. Stored values are JSON (the declared type's JSON form),
so they travel through the changelog and into snapshots unchanged.

Descriptors are frozen values: declare them once, at module level, and list
them on the agent (``states=[...]``) so savepoints and queries know them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import TypeAdapter, ValidationError

from eddy.eventtime.ttl import Ttl

if TYPE_CHECKING:
    from eddy.eventtime.state import KeyedStates

T = TypeVar("T")
Kind = Literal["value", "list", "map"]


class StateTypeError(TypeError):
    """A value written to a state is not of the state's declared type. Fix the
    value, or declare the type the function really stores."""


@dataclass(frozen=True, eq=False)
class StateDescriptor(Generic[T]):
    """A named keyed state of values of type ``type``.

    Attributes:
        queryable: serve it over REST (``GET /agents/<agent>/state/<name>/<key>``).
        version: the stored format's version (raise it when the type changes in a
            way old values cannot be read as; see docs/savepoints.md).
        migrate: ``{v: step}``: each step turns a version-``v`` value (as JSON)
            into a version ``v + 1`` value; a savepoint written at an older
            version is migrated step by step when it is resumed.
    """

    name: str
    type: type[T]
    ttl: Ttl | None = None
    queryable: bool = False
    version: int = 1
    migrate: Mapping[int, Callable[[Any], Any]] | None = None
    kind: Kind = field(default="value", init=False)

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"state name {self.name!r}: use letters, digits, _ and -")
        if self.version < 1:
            raise ValueError("state versions start at 1")
        self.adapter  # noqa: B018  (an unsupported type fails at declaration)

    @property
    def stored_type(self) -> Any:
        """The type of what one key holds (the value, the list, the map)."""
        return self.type

    @cached_property
    def adapter(self) -> TypeAdapter[Any]:
        try:
            return TypeAdapter(self.stored_type)
        except Exception as exc:  # pydantic rejects types it cannot validate
            raise StateTypeError(f"state {self.name!r}: type {self.type!r}: {exc}") from None

    def to_json(self, value: Any) -> Any:
        """``value`` checked against the declared type, as JSON types.

        Raises:
            StateTypeError: the type does not accept ``value``.
        """
        try:
            checked = self.adapter.validate_python(value)
            return self.adapter.dump_python(checked, mode="json")
        except (ValidationError, ValueError, TypeError) as exc:
            raise StateTypeError(
                f"state {self.name!r} holds {_type_name(self.stored_type)}; cannot store "
                f"{value!r}: {_reason(exc)}"
            ) from None

    def from_json(self, stored: Any) -> Any:
        return self.adapter.validate_python(stored)


class ValueState(StateDescriptor[T]):
    """One value per key: ``ValueState("last_temp", float)``."""


@dataclass(frozen=True, eq=False)
class ListState(StateDescriptor[T]):
    """A list of values per key: ``ListState("recent", Alert)``."""

    kind: Kind = field(default="list", init=False)

    @property
    def stored_type(self) -> Any:
        return list[self.type]  # type: ignore[name-defined]


@dataclass(frozen=True, eq=False)
class MapState(StateDescriptor[T]):
    """A map from string keys to values, per key: ``MapState("counts", int)``."""

    kind: Kind = field(default="map", init=False)

    @property
    def stored_type(self) -> Any:
        return dict[str, self.type]  # type: ignore[name-defined]


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else first["msg"]
    return str(exc)


class _Typed:
    __slots__ = ("_desc", "_states")

    def __init__(self, states: KeyedStates, descriptor: StateDescriptor[Any]) -> None:
        self._states = states
        self._desc = descriptor

    def _read(self) -> Any | None:
        stored = self._states.read(self._desc.name, self._desc.ttl)
        return None if stored is None else self._desc.from_json(stored)

    def _write(self, value: Any) -> None:
        self._states.write(self._desc.name, self._desc.ttl, self._desc.to_json(value))

    def clear(self) -> None:
        self._states.clear(self._desc.name, self._desc.ttl)


class Value(_Typed, Generic[T]):
    """The current key's value of a :class:`ValueState`."""

    def get(self, default: T | None = None) -> T | None:
        value: T | None = self._read()
        return default if value is None else value

    def set(self, value: T) -> None:
        if value is None:
            raise StateTypeError(f"state {self._desc.name!r}: None means absent; use clear()")
        self._write(value)


class Items(_Typed, Generic[T]):
    """The current key's list of a :class:`ListState`."""

    def get(self) -> list[T]:
        return list(self._read() or [])

    def add(self, value: T) -> None:
        self.update([*self.get(), value])

    def update(self, values: list[T]) -> None:
        if values:
            self._write(list(values))
        else:
            self.clear()


class Entries(_Typed, Generic[T]):
    """The current key's map of a :class:`MapState`."""

    def _map(self) -> dict[str, T]:
        return dict(self._read() or {})

    def get(self, map_key: str, default: T | None = None) -> T | None:
        return self._map().get(map_key, default)

    def put(self, map_key: str, value: T) -> None:
        entries = self._map()
        entries[map_key] = value
        self._write(entries)

    def remove(self, map_key: str) -> None:
        entries = self._map()
        if map_key in entries:
            del entries[map_key]
            if entries:
                self._write(entries)
            else:
                self.clear()

    def contains(self, map_key: str) -> bool:
        return map_key in self._map()

    def items(self) -> Iterator[tuple[str, T]]:
        return iter(self._map().items())

    def is_empty(self) -> bool:
        return not self._map()
