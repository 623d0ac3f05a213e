"""Kafka in memory, as the test driver's tasks use it: a read_committed reader sees
committed transactions only, stops at one still open, and every transaction's end
takes an offset, as on a broker."""

from __future__ import annotations

import asyncio

from aiokafka import TopicPartition
from hypothesis import given
from hypothesis import strategies as st

from eddy.runtime.memory import BATCH_RECORDS, MemoryBroker, MemoryProducer

# Per step: which of two producers, and what it does.
STEPS = st.lists(
    st.tuples(st.integers(0, 1), st.sampled_from(["send", "send", "commit", "abort"])),
    max_size=40,
)


@given(steps=STEPS)
def test_a_reader_sees_exactly_the_committed_transactions(steps: list[tuple[int, str]]) -> None:
    async def run() -> None:
        broker = MemoryBroker(lambda: 7)
        visible: list[bytes] = []
        broker.on_visible = lambda records: visible.extend(r.value or b"" for r in records)
        producers = [MemoryProducer(broker, transactional=True) for _ in range(2)]
        open_sends: list[list[tuple[int, bytes]]] = [[], []]  # (offset, value)
        committed: list[tuple[int, bytes]] = []
        markers = 0
        for number, (which, action) in enumerate(steps):
            producer = producers[which]
            if action == "send":
                if not open_sends[which]:
                    await producer.begin_transaction()
                value = f"{which}-{number}".encode()
                metadata = await (await producer.send("t", value))
                open_sends[which].append((metadata.offset, value))
            elif open_sends[which]:
                ending = action == "commit"
                await (producer.commit_transaction() if ending else producer.abort_transaction())
                committed += open_sends[which] if ending else []
                open_sends[which] = []
                markers += 1
            # A reader stops at the first record of a transaction still open.
            stable = min((o for sends in open_sends for o, _ in sends), default=2**31)
            expected = [v for o, v in sorted(committed) if o < stable]
            assert [r.value for r in broker.read("t", 0, 0)] == expected
        for which, producer in enumerate(producers):
            if open_sends[which]:
                await producer.abort_transaction()
                markers += 1
        records = broker.read("t", 0, 0)
        assert [(r.offset, r.value) for r in records] == sorted(committed)
        assert sorted(visible) == sorted(v for _, v in committed)
        sends = sum(1 for _, action in steps if action == "send")
        assert broker.end_offset("t", 0) == sends + markers

    asyncio.run(run())


def test_a_send_resolves_with_the_offset_and_the_producers_clock() -> None:
    async def run() -> None:
        broker = MemoryBroker(lambda: 1_234)
        producer = MemoryProducer(broker, transactional=False)
        first = await (await producer.send("out", b"a", key=b"k"))
        second = await (await producer.send("out", b"b", timestamp_ms=5))
        assert (first.offset, first.timestamp, second.offset, second.timestamp) == (0, 1_234, 1, 5)
        assert first.topic_partition == TopicPartition("out", 0)
        assert [r.stamped for r in broker.read("out", 0, 0)] == [True, False]

    asyncio.run(run())


def test_a_changelog_batch_fills_and_resolves_with_its_first_offset() -> None:
    async def run() -> None:
        broker = MemoryBroker(lambda: 0)
        producer = MemoryProducer(broker, transactional=True)
        await producer.begin_transaction()
        batch = producer.create_batch()
        for n in range(BATCH_RECORDS):
            assert batch.append(key=str(n).encode(), value=b"v", timestamp=None) is not None
        assert batch.append(key=b"full", value=b"v", timestamp=None) is None
        batch.close()
        metadata = await (await producer.send_batch(batch, "changelog", partition=0))
        await producer.commit_transaction()
        assert metadata.offset == 0
        assert len(broker.read("changelog", 0, 0)) == BATCH_RECORDS

    asyncio.run(run())


def test_records_no_reader_keeps_are_counted_not_stored() -> None:
    async def run() -> None:
        broker = MemoryBroker(lambda: 0)
        broker.kept = {"in"}
        producer = MemoryProducer(broker, transactional=False)
        for _ in range(3):
            await producer.send("out", b"x")
        assert (broker.read("out", 0, 0), broker.end_offset("out", 0)) == ([], 3)

    asyncio.run(run())
