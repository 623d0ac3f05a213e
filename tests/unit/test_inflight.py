"""The note of the record in flight (service/runtime/inflight.py): one death with a
record in flight never poisons it, two in a row do; it survives a real SIGKILL; an
asynchronous record is noted only while it runs."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eddy.runtime.inflight import IN_FLIGHT, NONE, SOURCE, InFlight, Suspect, WhileRunning


def die_with(path: Path, offset: int, source: int = 0) -> None:
    """What a process killed while processing ``offset`` leaves behind."""
    note = InFlight(path)
    note.words[SOURCE] = source
    note.words[IN_FLIGHT] = offset
    note.close()  # no clearing: the process is gone


def test_one_death_makes_a_suspect_and_a_second_in_a_row_poison(tmp_path: Path) -> None:
    path = tmp_path / "0.inflight"
    assert InFlight(path).recover() is None  # a new file: nothing in flight
    die_with(path, 7)
    first = InFlight(path).recover()
    assert first == Suspect(source=0, offset=7, deaths=1)
    assert not first.poison
    die_with(path, 7)
    assert InFlight(path).recover() == Suspect(0, 7, 2)
    assert Suspect(0, 7, 2).poison


def test_a_death_on_another_record_starts_the_count_again(tmp_path: Path) -> None:
    path = tmp_path / "0.inflight"
    die_with(path, 7)
    InFlight(path).recover()
    die_with(path, 8)  # the next record: 7 went through
    assert InFlight(path).recover() == Suspect(0, 8, 1)
    die_with(path, 8, source=1)  # the same offset of the other input
    assert InFlight(path).recover() == Suspect(1, 8, 1)


def test_a_death_with_nothing_in_flight_counts_against_no_record(tmp_path: Path) -> None:
    path = tmp_path / "0.inflight"
    die_with(path, 7)
    InFlight(path).recover()
    note = InFlight(path)
    note.words[IN_FLIGHT] = NONE  # the batch was done when the kill landed
    note.close()
    assert InFlight(path).recover() == Suspect(0, 7, 1)
    forgotten = InFlight(path)
    forgotten.forget()  # committed past it
    forgotten.close()
    assert InFlight(path).recover() is None


Event = int | None  # a death with this offset in flight, or with none in flight


@given(st.lists(st.one_of(st.none(), st.integers(0, 3)), max_size=12))
def test_a_record_is_poison_exactly_after_two_deaths_in_a_row_with_it_in_flight(
    deaths: list[Event],
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.inflight"
        for n, offset in enumerate(deaths):
            if offset is not None:
                die_with(path, offset)
            found = InFlight(path).recover()
            # Deaths with a record in flight so far; those with none count for no record.
            onto = [d for d in deaths[: n + 1] if d is not None]
            if not onto:
                assert found is None
                continue
            last, in_a_row = onto[-1], 0
            for d in reversed(onto):
                if d != last:
                    break
                in_a_row += 1
            assert found == Suspect(0, last, in_a_row)
            assert found.poison == (in_a_row >= 2)


CHILD = """
import asyncio, os, signal, sys
from pathlib import Path
from aiokafka import TopicPartition
from eddy.metrics import Metrics
from eddy.runtime.inflight import InFlight
from eddy.runtime.output import TaskOutput
from eddy.runtime.task import Task
from eddy.tables.store import PartitionStore

class Logic:
    watermark_ms = 0
    def process(self, record, out):
        if record.offset == 41:
            os.kill(os.getpid(), signal.SIGKILL)  # a segfault, an OOM kill...
    def prepare_commit(self): pass
    def reload(self): pass

class Stage:
    name, sources, output_topics, state_schemas = "s", ("in",), (), {}
    def create_logic(self, partition, store, txn): return Logic()

class Record:
    def __init__(self, offset):
        self.topic, self.partition, self.offset = "in", 0, offset
        self.timestamp, self.key, self.value, self.headers = 0, None, b"{}", ()

async def main():
    root = Path(sys.argv[1])
    task = Task(pipeline=Stage(), partition=0, store=PartitionStore(root / "0"),
                producer=None, exactly_once=False, changelog_topic="c",
                output=TaskOutput("s", "dead", Metrics()),
                offsets={TopicPartition("in", 0): 0},
                inflight=InFlight(root / "0.inflight"))
    await task.process(TopicPartition("in", 0), [Record(n) for n in range(40)])
    await task.process(TopicPartition("in", 0), [Record(n) for n in range(40, 80)])

asyncio.run(main())
"""


def test_the_note_survives_a_sigkill_in_the_middle_of_a_record(tmp_path: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(tmp_path)], capture_output=True
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    assert InFlight(tmp_path / "0.inflight").recover() == Suspect(source=0, offset=41, deaths=1)


async def test_an_async_record_is_noted_only_while_it_runs() -> None:
    note = InFlight(None)
    seen: list[int] = []
    gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def record() -> None:
        seen.append(note.words[IN_FLIGHT])
        answer = await gate  # a lookup: other stages' records run meanwhile
        seen.append(note.words[IN_FLIGHT])
        assert answer == "room 1"

    async def meanwhile() -> None:
        seen.append(note.words[IN_FLIGHT])
        gate.set_result("room 1")

    await asyncio.gather(WhileRunning(record(), note.words, 5), meanwhile())
    assert seen == [5, NONE, 5]
    assert note.words[IN_FLIGHT] == NONE

    async def failing() -> None:
        await asyncio.sleep(0)
        raise KeyError("the agent's bug")

    with pytest.raises(KeyError, match="the agent's bug"):
        await WhileRunning(failing(), note.words, 6)
    assert note.words[IN_FLIGHT] == NONE

    waiting = asyncio.ensure_future(WhileRunning(asyncio.sleep(60), note.words, 7))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert note.words[IN_FLIGHT] == NONE
