"""The exactly-once checker: per key, a running count/sum/min and the last
sequence number, with every effect made visible.

For each input ``{id, key, seq, amount}`` it emits the record's id and source
position (``echo``), the aggregate after it (``agg``), and an alert when the
sequence is not the previous one plus one. Under exactly-once a reader of the
committed outputs finds each id once, every aggregate equal to a recomputation
from the input, and no alert, whatever failed on the way.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from eddy import Context, Topic, ValueState
from eddy.examples.app import app
from eddy.examples.settings import CheckerSettings


class CheckerRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: StrictInt
    key: Annotated[str, Field(min_length=1)]
    seq: Annotated[StrictInt, Field(ge=0)]
    amount: StrictInt


class Aggregate(BaseModel):
    count: int = 0
    sum: int = 0
    min: int | None = None
    last_seq: int = -1


AGG = ValueState("agg", Aggregate, queryable=True)


class Checker:
    def __init__(self, topics: dict[str, Topic[object]]) -> None:
        self.echo, self.agg, self.alerts = topics["echo"], topics["agg"], topics["alerts"]

    def process_element(self, value: CheckerRecord, ctx: Context) -> None:
        state = ctx.state(AGG)
        agg = state.get() or Aggregate()
        if value.seq != agg.last_seq + 1:
            alert = {"key": value.key, "seq": value.seq, "last_seq": agg.last_seq}
            ctx.send(self.alerts, alert)
        low = value.amount if agg.min is None else min(agg.min, value.amount)
        agg = Aggregate(
            count=agg.count + 1, sum=agg.sum + value.amount, min=low, last_seq=value.seq
        )
        state.set(agg)
        assert ctx.source is not None
        _, partition, offset = ctx.source
        ctx.send(self.echo, {"id": value.id, "partition": partition, "offset": offset})
        ctx.send(self.agg, {"key": value.key, "seq": value.seq, **agg.model_dump()})


def checker_topics(prefix: str) -> dict[str, Topic[object]]:
    topics: dict[str, Topic[object]] = {
        name: Topic(f"{prefix}{name}") for name in ("echo", "agg", "alerts")
    }
    topics["input"] = Topic(f"{prefix}input", CheckerRecord, key="key")
    return topics


@app.define(settings=CheckerSettings, default=False)
def eos_checker(s: CheckerSettings) -> None:
    topics = checker_topics(s.checker_topic_prefix)
    side = {name: topics[name] for name in ("echo", "agg", "alerts")}
    # Everything goes out through ctx.send; the chain still names a main output.
    app.stream(topics["input"]).process(Checker(topics), states=[AGG], side_outputs=side).to(
        topics["agg"]
    )
