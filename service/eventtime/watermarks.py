"""Watermarks: strategies (frozen definitions), per-input generators, and the
tracker that turns several inputs into one operator clock (docs/semantics.md,
"Watermarks").

* bounded out-of-orderness: ``max timestamp - bound - 1`` (Flink's formula, so an
  event exactly ``bound`` behind the maximum is still on time); ascending is the
  bound 0; punctuated asks a function of each record;
* emitted per record (the default: a replay then judges lateness exactly as the
  first run did) or every ``emit_every_ms`` of processing time;
* an input silent for ``idle_timeout_ms`` leaves the minimum until it speaks;
* with ``quiet_advance_ms``, an input silent that long lets its watermark follow
  the wall clock (``now - quiet_advance - bound - 1``), so windows close on a
  stream that went quiet. It assumes event time tracks the wall clock; off by
  default, and not deterministic on replay;
* the emitted watermark never goes backwards and is snapshotted with the state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# Flink's Long.MIN_VALUE: no event time has been observed yet.
MIN_WATERMARK = -(2**63)


class WatermarkGenerator(Protocol):
    """Tracks one input's event-time progress. Watermarks never go backwards."""

    def on_event(self, timestamp_ms: int, value: Any) -> None: ...

    def on_quiet(self, now_ms: int, quiet_for_ms: int) -> None:
        """Called on ticks while no record arrived for ``quiet_for_ms``."""
        ...

    @property
    def watermark_ms(self) -> int: ...

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, snapshot: dict[str, Any]) -> None: ...


class WatermarkStrategy(Protocol):
    @property
    def emit_every_ms(self) -> int | None: ...

    @property
    def idle_timeout_ms(self) -> int | None: ...

    def create(self) -> WatermarkGenerator: ...


@dataclass(frozen=True, slots=True)
class BoundedOutOfOrderness:
    bound_ms: int
    emit_every_ms: int | None = None
    idle_timeout_ms: int | None = None
    quiet_advance_ms: int | None = None

    def __post_init__(self) -> None:
        if self.bound_ms < 0:
            raise ValueError(f"bound_ms must be >= 0, got {self.bound_ms}")
        for name in ("emit_every_ms", "idle_timeout_ms", "quiet_advance_ms"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive when set, got {value}")

    def create(self) -> BoundedGenerator:
        return BoundedGenerator(self.bound_ms, self.quiet_advance_ms)


def Ascending(
    emit_every_ms: int | None = None, idle_timeout_ms: int | None = None
) -> BoundedOutOfOrderness:
    """Timestamps that never decrease: watermark = max timestamp - 1."""
    return BoundedOutOfOrderness(0, emit_every_ms, idle_timeout_ms)


class BoundedGenerator:
    __slots__ = ("_bound_ms", "_max_seen_ms", "_quiet_advance_ms", "_watermark_ms")

    def __init__(self, bound_ms: int, quiet_advance_ms: int | None = None) -> None:
        self._bound_ms = bound_ms
        self._quiet_advance_ms = quiet_advance_ms
        self._max_seen_ms = MIN_WATERMARK  # nothing seen yet: any timestamp is newer
        self._watermark_ms = MIN_WATERMARK

    def on_event(self, timestamp_ms: int, value: Any = None) -> None:
        if timestamp_ms > self._max_seen_ms:
            self._max_seen_ms = timestamp_ms
            candidate = timestamp_ms - self._bound_ms - 1
            if candidate > self._watermark_ms:
                self._watermark_ms = candidate

    def on_quiet(self, now_ms: int, quiet_for_ms: int) -> None:
        if self._quiet_advance_ms is not None and quiet_for_ms >= self._quiet_advance_ms:
            candidate = now_ms - self._quiet_advance_ms - self._bound_ms - 1
            if candidate > self._watermark_ms:
                self._watermark_ms = candidate

    @property
    def watermark_ms(self) -> int:
        return self._watermark_ms

    @property
    def max_timestamp_ms(self) -> int | None:
        return None if self._max_seen_ms == MIN_WATERMARK else self._max_seen_ms

    def snapshot(self) -> dict[str, Any]:
        return {"max_timestamp_ms": self.max_timestamp_ms, "watermark_ms": self._watermark_ms}

    def restore(self, snapshot: dict[str, Any]) -> None:
        saved = snapshot.get("max_timestamp_ms")
        self._max_seen_ms = max(self._max_seen_ms, MIN_WATERMARK if saved is None else int(saved))
        self._watermark_ms = max(self._watermark_ms, int(snapshot["watermark_ms"]))


@dataclass(frozen=True, slots=True)
class Punctuated:
    """A watermark decided per record: ``watermark_of(value, timestamp_ms)`` returns
    the new watermark or None (no change); e.g. a marker record from the source."""

    watermark_of: Callable[[Any, int], int | None]
    emit_every_ms: int | None = None
    idle_timeout_ms: int | None = None

    def create(self) -> PunctuatedGenerator:
        return PunctuatedGenerator(self.watermark_of)


class PunctuatedGenerator:
    def __init__(self, watermark_of: Callable[[Any, int], int | None]) -> None:
        self._of = watermark_of
        self._watermark_ms = MIN_WATERMARK

    def on_event(self, timestamp_ms: int, value: Any = None) -> None:
        candidate = self._of(value, timestamp_ms)
        if candidate is not None and candidate > self._watermark_ms:
            self._watermark_ms = candidate

    def on_quiet(self, now_ms: int, quiet_for_ms: int) -> None:
        return None

    @property
    def watermark_ms(self) -> int:
        return self._watermark_ms

    def snapshot(self) -> dict[str, Any]:
        return {"watermark_ms": self._watermark_ms}

    def restore(self, snapshot: dict[str, Any]) -> None:
        self._watermark_ms = max(self._watermark_ms, int(snapshot["watermark_ms"]))


@dataclass(frozen=True, slots=True)
class FromUpstream:
    """The clock after a repartition (Flink's minimum over the input channels,
    across a shuffle; docs/semantics.md, "After a repartition"): each
    upstream task writes its watermark into every partition of the repartition
    topic; this task's clock is the minimum over the upstream tasks, minus those
    silent for ``idle_timeout_ms``. Data records do not move it."""

    idle_timeout_ms: int | None = None
    emit_every_ms: int | None = None

    def create(self) -> MarkerGenerator:
        return MarkerGenerator()


class MarkerGenerator:
    """An input whose watermark is whatever its marker records say."""

    def __init__(self) -> None:
        self._watermark_ms = MIN_WATERMARK

    def on_event(self, timestamp_ms: int, value: Any = None) -> None:
        return None

    def on_marker(self, watermark_ms: int) -> None:
        if watermark_ms > self._watermark_ms:
            self._watermark_ms = watermark_ms

    def on_quiet(self, now_ms: int, quiet_for_ms: int) -> None:
        return None

    @property
    def watermark_ms(self) -> int:
        return self._watermark_ms

    def snapshot(self) -> dict[str, Any]:
        return {"watermark_ms": self._watermark_ms}

    def restore(self, snapshot: dict[str, Any]) -> None:
        self._watermark_ms = max(self._watermark_ms, int(snapshot["watermark_ms"]))


@dataclass(frozen=True)
class PerInput:
    """A different strategy per input, e.g. 30 s of delay for a car's OBD device
    and minutes for the driver's phone app, joined. The clock is still the minimum
    over the inputs. Emission is set here, for all of them; an input goes idle
    after this ``idle_timeout_ms`` if set, else after its own strategy's."""

    strategies: dict[str, WatermarkStrategy]
    emit_every_ms: int | None = None
    idle_timeout_ms: int | None = None

    def create(self) -> WatermarkGenerator:
        raise TypeError("PerInput builds one generator per input: use create_for(input)")

    def create_for(self, input_name: str) -> WatermarkGenerator:
        try:
            return self.strategies[input_name].create()
        except KeyError:
            known = ", ".join(sorted(self.strategies))
            raise ValueError(f"no watermark strategy for input {input_name!r} ({known})") from None


@dataclass(frozen=True, slots=True)
class NoWatermarks:
    """No event-time clock (Flink's ``noWatermarks``): for count windows, whose
    triggers count elements; event-time timers fire only at the end of input."""

    emit_every_ms: int | None = None
    idle_timeout_ms: int | None = None

    def create(self) -> MarkerGenerator:
        return MarkerGenerator()  # no markers ever come: it stays at the minimum


def _idle_timeout(strategy: WatermarkStrategy, input_name: str) -> int | None:
    if isinstance(strategy, PerInput) and strategy.idle_timeout_ms is None:
        own = strategy.strategies.get(input_name)
        return None if own is None else own.idle_timeout_ms
    return strategy.idle_timeout_ms


def _generator(strategy: WatermarkStrategy, input_name: str) -> WatermarkGenerator:
    if isinstance(strategy, PerInput):
        return strategy.create_for(input_name)
    return strategy.create()


class WatermarkTracker:
    """One operator's clock: the minimum over its non-idle inputs, emitted per
    record or periodically, never decreasing."""

    def __init__(self, strategy: WatermarkStrategy, inputs: Sequence[str]) -> None:
        if not inputs:
            raise ValueError("a watermark tracker needs at least one input")
        self._strategy = strategy
        self._generators = {name: _generator(strategy, name) for name in inputs}
        self._last_event_at: dict[str, int | None] = dict.fromkeys(inputs)
        self._idle_after = {name: _idle_timeout(strategy, name) for name in inputs}
        self._last_emit_at: int | None = None
        self.watermark_ms = MIN_WATERMARK
        self.idle: set[str] = set()
        # One input, emitted per record, nothing wall-clock based: the common case,
        # where the operator's clock is simply the generator's.
        simple = len(inputs) == 1 and strategy.emit_every_ms is None
        simple = simple and all(t is None for t in self._idle_after.values())
        simple = simple and getattr(strategy, "quiet_advance_ms", None) is None
        self._only = next(iter(self._generators.values())) if simple else None
        self._bounded = self._only if isinstance(self._only, BoundedGenerator) else None

    def on_event(self, input_name: str, timestamp_ms: int, value: Any, now_ms: int) -> bool:
        """Observe a record; True if the emitted watermark advanced."""
        bounded = self._bounded
        if bounded is not None and timestamp_ms <= bounded._max_seen_ms:
            return False  # not newer than the newest: nothing can move (a shortcut)
        only = self._only
        if only is not None:
            only.on_event(timestamp_ms, value)
            if only.watermark_ms > self.watermark_ms:
                self.watermark_ms = only.watermark_ms
                return True
            return False
        generator = self._generators.get(input_name)
        if generator is None:
            return False  # inputs learnt from upstream markers: data does not move them
        generator.on_event(timestamp_ms, value)
        self._last_event_at[input_name] = now_ms
        self.idle.discard(input_name)
        if self._strategy.emit_every_ms is None:
            return self._emit()
        return False

    def on_marker(self, upstream: int, upstreams: int, watermark_ms: int, now_ms: int) -> bool:
        """A watermark record from upstream task ``upstream`` of ``upstreams``.

        The first marker tells how many upstream tasks there are; until each has
        spoken (or gone idle), the clock waits for it, as Flink waits for every
        input channel.
        """
        for n in range(upstreams):
            name = f"upstream-{n}"
            if name not in self._generators:
                self._generators[name] = self._strategy.create()
                self._last_event_at[name] = now_ms
        for name in [n for n in self._generators if n not in _upstream_names(upstreams)]:
            del self._generators[name]  # the upstream shrank, or the initial placeholder
            self._last_event_at.pop(name, None)
            self.idle.discard(name)
        self._only = None
        name = f"upstream-{upstream}"
        generator = self._generators[name]
        if isinstance(generator, MarkerGenerator):
            generator.on_marker(watermark_ms)
        self._last_event_at[name] = now_ms
        self.idle.discard(name)
        if self._strategy.emit_every_ms is None:
            return self._emit()
        return False

    def on_tick(self, now_ms: int) -> bool:
        """Processing time passed: idleness, quiet advance, periodic emission."""
        default = self._strategy.idle_timeout_ms
        for name, generator in self._generators.items():
            last = self._last_event_at[name]
            if last is None:
                self._last_event_at[name] = last = now_ms
            quiet_for = now_ms - last
            generator.on_quiet(now_ms, quiet_for)
            timeout = self._idle_after.get(name, default)
            if timeout is not None and quiet_for >= timeout:
                self.idle.add(name)
        every = self._strategy.emit_every_ms
        if every is None or self._last_emit_at is None or now_ms - self._last_emit_at >= every:
            self._last_emit_at = now_ms
            return self._emit()
        return False

    def input_watermarks(self) -> dict[str, int]:
        return {name: g.watermark_ms for name, g in self._generators.items()}

    def snapshot(self) -> dict[str, Any]:
        return {
            "emitted_ms": self.watermark_ms,
            "inputs": {name: g.snapshot() for name, g in self._generators.items()},
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        saved = snapshot.get("inputs", {})
        if any(name.startswith("upstream-") for name in saved):
            # Inputs learnt from upstream markers come back as they were.
            self._generators = {name: self._strategy.create() for name in saved}
            self._last_event_at = dict.fromkeys(saved)
            self._only = None
        for name, state in saved.items():
            if name in self._generators:
                self._generators[name].restore(state)
        self.watermark_ms = max(self.watermark_ms, int(snapshot.get("emitted_ms", MIN_WATERMARK)))

    def _emit(self) -> bool:
        if not self._generators:
            return False
        active = [g.watermark_ms for n, g in self._generators.items() if n not in self.idle]
        if active:
            candidate = min(active)
        else:
            # Every input idle: none will hold the others back any more, so the clock
            # goes to the largest of their watermarks (Flink's StatusWatermarkValve
            # flushes the max across channels). Holding it instead would stall a
            # quiet stream whose inputs went idle within the same tick.
            candidate = max(g.watermark_ms for g in self._generators.values())
        if candidate > self.watermark_ms:
            self.watermark_ms = candidate
            return True
        return False


def _upstream_names(count: int) -> set[str]:
    return {f"upstream-{n}" for n in range(count)}
