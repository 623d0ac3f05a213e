"""Keyed state primitives (docs/semantics.md, "Keyed state"): value, list, map,
reducing, aggregating.

Every state is named and scoped to the current key. Values are JSON-compatible
(map keys are strings). A state may have a time-to-live: an entry reads as absent
once ``ttl_ms`` of processing time passed since it was written (or read, with
``refresh_on_read``), and a processing-time timer then deletes it for real, so
the store and its changelog (a tombstone) do not keep it: state never clears
itself otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from eddy.eventtime.functions import AggregateFunction
from eddy.eventtime.timers import Timer, TimerQueue
from eddy.eventtime.ttl import Ttl

if TYPE_CHECKING:
    from eddy.eventtime.descriptors import (
        Entries,
        Items,
        ListState,
        MapState,
        StateDescriptor,
        Value,
        ValueState,
    )

T = TypeVar("T")

TTL_NAMESPACE = "state.ttl."


class StateBackend(Protocol):
    """One JSON value per (state name, key)."""

    def get_state(self, name: str, key: str) -> Any | None: ...

    def put_state(self, name: str, key: str, value: Any) -> None: ...

    def delete_state(self, name: str, key: str) -> None: ...


class KeyedStates:
    """Creates state handles bound to the current key; owns TTL cleanup."""

    def __init__(
        self, backend: StateBackend, ttl_timers: TimerQueue, now_ms: Callable[[], int]
    ) -> None:
        self._backend = backend
        self._ttl_timers = ttl_timers
        self._now_ms = now_ms
        self.key = ""

    @overload
    def __call__(self, descriptor: ValueState[T]) -> Value[T]: ...
    @overload
    def __call__(self, descriptor: ListState[T]) -> Items[T]: ...
    @overload
    def __call__(self, descriptor: MapState[T]) -> Entries[T]: ...
    def __call__(self, descriptor: StateDescriptor[Any]) -> Any:
        """The current key's state named by ``descriptor``, typed as it declares."""
        from eddy.eventtime.descriptors import Entries, Items, Value

        handle = {"value": Value, "list": Items, "map": Entries}[descriptor.kind]
        return handle(self, descriptor)

    def value(self, name: str, ttl: Ttl | None = None) -> ValueHandle:
        return ValueHandle(self, name, ttl)

    def list(self, name: str, ttl: Ttl | None = None) -> ListHandle:
        return ListHandle(self, name, ttl)

    def map(self, name: str, ttl: Ttl | None = None) -> MapHandle:
        return MapHandle(self, name, ttl)

    def reducing(
        self, name: str, reduce: Callable[[Any, Any], Any], ttl: Ttl | None = None
    ) -> ReducingHandle:
        return ReducingHandle(self, name, reduce, ttl)

    def aggregating(
        self, name: str, aggregate: AggregateFunction[Any, Any, Any], ttl: Ttl | None = None
    ) -> AggregatingHandle:
        return AggregatingHandle(self, name, aggregate, ttl)

    def on_ttl_timer(self, timer: Timer) -> None:
        """A TTL timer fired: delete the entry if it really expired by now."""
        name = timer.namespace[len(TTL_NAMESPACE) :]
        stored = self._backend.get_state(name, timer.key)
        if isinstance(stored, dict) and stored.get("expires_ms", 0) <= timer.time_ms:
            self._backend.delete_state(name, timer.key)

    # -- used by the handles -------------------------------------------------------

    def read(self, name: str, ttl: Ttl | None) -> Any | None:
        stored = self._backend.get_state(name, self.key)
        if stored is None or ttl is None:
            return stored
        if stored["expires_ms"] <= self._now_ms():
            return None
        if ttl.refresh_on_read:
            self.write(name, ttl, stored["value"])
        return stored["value"]

    def write(self, name: str, ttl: Ttl | None, value: Any) -> None:
        if ttl is None:
            self._backend.put_state(name, self.key, value)
            return
        old = self._backend.get_state(name, self.key)
        if old is not None:
            self._ttl_timers.delete(self._ttl_timer(name, old["expires_ms"]))
        expires_ms = self._now_ms() + ttl.ttl_ms
        self._backend.put_state(name, self.key, {"value": value, "expires_ms": expires_ms})
        self._ttl_timers.register(self._ttl_timer(name, expires_ms))

    def clear(self, name: str, ttl: Ttl | None) -> None:
        if ttl is not None:
            old = self._backend.get_state(name, self.key)
            if old is not None:
                self._ttl_timers.delete(self._ttl_timer(name, old["expires_ms"]))
        self._backend.delete_state(name, self.key)

    def _ttl_timer(self, name: str, expires_ms: int) -> Timer:
        return Timer(expires_ms, TTL_NAMESPACE + name, self.key)


class _Handle:
    __slots__ = ("_name", "_states", "_ttl")

    def __init__(self, states: KeyedStates, name: str, ttl: Ttl | None) -> None:
        self._states = states
        self._name = name
        self._ttl = ttl

    def _read(self) -> Any | None:
        return self._states.read(self._name, self._ttl)

    def _write(self, value: Any) -> None:
        self._states.write(self._name, self._ttl, value)

    def clear(self) -> None:
        self._states.clear(self._name, self._ttl)


class ValueHandle(_Handle):
    def get(self, default: Any = None) -> Any:
        value = self._read()
        return default if value is None else value

    def set(self, value: Any) -> None:
        if value is None:
            raise ValueError("None means absent: use clear() to remove a value")
        self._write(value)


class ListHandle(_Handle):
    def get(self) -> list[Any]:
        return list(self._read() or [])

    def add(self, value: Any) -> None:
        self._write([*self.get(), value])

    def update(self, values: list[Any]) -> None:
        if values:
            self._write(list(values))
        else:
            self.clear()


class MapHandle(_Handle):
    def _map(self) -> dict[str, Any]:
        return dict(self._read() or {})

    def get(self, map_key: str, default: Any = None) -> Any:
        return self._map().get(map_key, default)

    def put(self, map_key: str, value: Any) -> None:
        entries = self._map()
        entries[map_key] = value
        self._write(entries)

    def remove(self, map_key: str) -> None:
        entries = self._map()
        if entries.pop(map_key, None) is not None:
            self._write(entries) if entries else self.clear()

    def contains(self, map_key: str) -> bool:
        return map_key in self._map()

    def items(self) -> Iterator[tuple[str, Any]]:
        return iter(self._map().items())

    def is_empty(self) -> bool:
        return not self._map()


class ReducingHandle(_Handle):
    __slots__ = ("_reduce",)

    def __init__(
        self, states: KeyedStates, name: str, reduce: Callable[[Any, Any], Any], ttl: Ttl | None
    ) -> None:
        super().__init__(states, name, ttl)
        self._reduce = reduce

    def get(self) -> Any:
        return self._read()

    def add(self, value: Any) -> None:
        current = self._read()
        self._write(value if current is None else self._reduce(current, value))


class AggregatingHandle(_Handle):
    __slots__ = ("_aggregate",)

    def __init__(
        self,
        states: KeyedStates,
        name: str,
        aggregate: AggregateFunction[Any, Any, Any],
        ttl: Ttl | None,
    ) -> None:
        super().__init__(states, name, ttl)
        self._aggregate = aggregate

    def get(self) -> Any:
        accumulator = self._read()
        return None if accumulator is None else self._aggregate.result(accumulator)

    def add(self, value: Any) -> None:
        accumulator = self._read()
        if accumulator is None:
            accumulator = self._aggregate.create()
        self._write(self._aggregate.add(value, accumulator))
