"""Replay specs for process functions and joins (docs/replay.md, "process").

A process spec names a Python function object (``module:attribute``, a class is
called with ``args``) and its inputs, each with its key and timestamp fields. It
is how a user replays a keyed process function, a co-process function or a join
over a file of records, with no broker.
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from eddy.eventtime.spec import AscendingWatermark, BoundedWatermark, ExplicitWatermark
from eddy.eventtime.watermarks import BoundedOutOfOrderness, WatermarkStrategy


class InputSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(min_length=1)]
    key: str
    timestamp: str | None = None


class ProcessReplaySpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["process"]
    function: Annotated[str, Field(pattern=r"^[\w.]+:[\w.]+$")]
    args: dict[str, Any] = Field(default_factory=dict)
    inputs: Annotated[list[InputSpec], Field(min_length=1, max_length=2)]
    watermark: (
        Annotated[
            BoundedWatermark | AscendingWatermark | ExplicitWatermark,
            Field(discriminator="type"),
        ]
        | None
    ) = None

    def build_function(self) -> Any:
        """Import and build the function object.

        Raises:
            ValueError: the module, the attribute or the arguments do not work.
        """
        module_name, _, attribute = self.function.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(f"function: cannot import {module_name!r} ({exc})") from None
        for part in attribute.split("."):
            if not hasattr(target, part):
                raise ValueError(f"function: {module_name!r} has no {attribute!r}")
            target = getattr(target, part)
        if isinstance(target, type):
            try:
                return target(**self.args)
            except TypeError as exc:
                raise ValueError(f"args: {exc}") from None
        if self.args:
            raise ValueError("args: only a class takes args")
        return target

    def watermark_strategy(self) -> WatermarkStrategy | None:
        w = self.watermark
        if isinstance(w, BoundedWatermark):
            return BoundedOutOfOrderness(
                w.bound_ms, w.emit_every_ms, w.idle_timeout_ms, w.quiet_advance_ms
            )
        if isinstance(w, AscendingWatermark):
            return BoundedOutOfOrderness(0, w.emit_every_ms, w.idle_timeout_ms, w.quiet_advance_ms)
        return None
