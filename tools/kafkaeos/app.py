"""The application under test of Kafka's exactly-once system test, written
with Eddy's public API (what ``EosTestClient`` is for Kafka Streams).

Agent ``eos`` reads ``data`` (String keys, Integer values) and, per record,
writes the record itself to ``echo`` and ``repartition``, the key's running
minimum to ``min`` (Integer) and its running sum to ``sum`` (Long). Agent
``eos_repartitioned`` reads ``repartition`` and writes the key's running
maximum to ``max`` and its count to ``cnt``. Both read in consumer group
``EosTest``, whose committed offsets the verifier reads. Outputs keep the
input's key, so Kafka's default partitioner (murmur2, the same in aiokafka and
the Java clients) puts each in the partition number of its input record, as
the verifier requires of ``echo``, ``min`` and ``sum``.

    eddy worker --app tools.kafkaeos.app:app
"""

from __future__ import annotations

from eddy import App, Context, Topic, ValueState
from tools.kafkaeos.serdes import KafkaInteger, KafkaLong

GROUP_ID = "EosTest"  # EosTestClient.APP_ID: the group the verifier reads
INT, LONG = KafkaInteger(), KafkaLong()

DATA = Topic("data", int, serde=INT, kafka_key=True)
ECHO = Topic("echo", int, serde=INT)
MIN = Topic("min", int, serde=INT)
SUM = Topic("sum", int, serde=LONG)
REPARTITION = Topic("repartition", int, serde=INT, kafka_key=True)
MAX = Topic("max", int, serde=INT)
CNT = Topic("cnt", int, serde=LONG)
TOPICS = (DATA, ECHO, MIN, SUM, REPARTITION, MAX, CNT)

MIN_SO_FAR = ValueState("min", int)
SUM_SO_FAR = ValueState("sum", int)
MAX_SO_FAR = ValueState("max", int)
COUNT_SO_FAR = ValueState("cnt", int)

app = App("eos-kafka")


@app.agent(
    DATA,
    outputs=[ECHO, MIN, SUM, REPARTITION],
    states=[MIN_SO_FAR, SUM_SO_FAR],
    group_id=GROUP_ID,
)
def eos(value: int, ctx: Context) -> None:
    ctx.send(ECHO, value)
    ctx.send(REPARTITION, value)
    low = ctx.state(MIN_SO_FAR)
    previous = low.get()
    low.set(value if previous is None else min(previous, value))
    ctx.send(MIN, low.get())
    total = ctx.state(SUM_SO_FAR)
    total.set((total.get() or 0) + value)
    ctx.send(SUM, total.get())


@app.agent(
    REPARTITION,
    outputs=[MAX, CNT],
    states=[MAX_SO_FAR, COUNT_SO_FAR],
    group_id=GROUP_ID,
)
def eos_repartitioned(value: int, ctx: Context) -> None:
    high = ctx.state(MAX_SO_FAR)
    previous = high.get()
    high.set(value if previous is None else max(previous, value))
    ctx.send(MAX, high.get())
    count = ctx.state(COUNT_SO_FAR)
    count.set((count.get() or 0) + 1)
    ctx.send(CNT, count.get())
