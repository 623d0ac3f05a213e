"""The exactly-once checker (docs/eos-verification.md): per key, a running
count/sum/min and the last sequence number, with every effect made visible.

For each input ``{id, key, seq, amount}`` it emits the record's id and source
position (``echo``), the aggregate after it (``agg``), and an alert when the
sequence is not the previous one plus one. Under exactly-once a reader of the
committed outputs finds each id once, every aggregate equal to a recomputation
from the input, and no alert, whatever failed on the way.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from service.eventtime.process import Context
from service.pipeline.keyed import Input, KeyedProcess
from service.settings import Settings
from tables.schema import StateSchema

NAME = "eos_checker"


class CheckerRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: StrictInt
    key: Annotated[str, Field(min_length=1)]
    seq: Annotated[StrictInt, Field(ge=0)]
    amount: StrictInt


class Checker:
    def process_element(self, value: dict[str, Any], ctx: Context) -> None:
        state = ctx.state.value("agg")
        agg = state.get() or {"count": 0, "sum": 0, "min": None, "last_seq": -1}
        if value["seq"] != agg["last_seq"] + 1:
            alert = {"key": value["key"], "seq": value["seq"], "last_seq": agg["last_seq"]}
            ctx.output(alert, output="alerts")
        low = value["amount"] if agg["min"] is None else min(agg["min"], value["amount"])
        agg = {
            "count": agg["count"] + 1,
            "sum": agg["sum"] + value["amount"],
            "min": low,
            "last_seq": value["seq"],
        }
        state.set(agg)
        assert ctx.source is not None
        _, partition, offset = ctx.source
        ctx.output({"id": value["id"], "partition": partition, "offset": offset}, output="echo")
        ctx.output({"key": value["key"], "seq": value["seq"], **agg}, output="agg")


def topics(settings: Settings) -> dict[str, str]:
    prefix = settings.checker_topic_prefix
    return {name: f"{prefix}{name}" for name in ("input", "echo", "agg", "alerts")}


def build(settings: Settings) -> KeyedProcess:
    names = topics(settings)
    source = Input(names.pop("input"), CheckerRecord, key=lambda r: r.key)
    return KeyedProcess(
        name=NAME,
        inputs=[source],
        function=Checker(),
        outputs=names,
        states={"agg": StateSchema()},
    )
