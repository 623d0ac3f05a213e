"""How far a task's inputs are: committed offset, end offset, lag (``GET /jobs``).

Read from what the consumer already knows (offsets that came with the last fetch
response), so asking costs no request to Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import IllegalStateError

from eddy.runtime.task import Task

# position() waits when the consumer has no position yet (a reset in progress);
# a status answer must not wait for that.
POSITION_WAIT_S = 0.2


@dataclass(frozen=True)
class InputProgress:
    topic: str
    committed_offset: int
    end_offset: int | None
    lag: int | None


def records_behind(
    end: int | None, committed: int, processed: int, position: int | None, in_hand: bool
) -> int | None:
    """Records of one source partition that are not committed yet.

    ``end`` is the last stable offset (what a read_committed consumer can read).
    An input written in transactions (another pipeline's output, a repartition
    topic) ends with the transaction's commit marker, which holds an offset but no
    record: the committed offset (last record + 1) then stays one short of the end
    for ever. When everything the consumer returned is processed and committed,
    whatever lies between the committed offset and the consumer's position is
    such markers (or aborted records), so the position is the better mark.

    Args:
        end: the end offset; None before the first fetch (then the lag is unknown).
        committed: the offset the last checkpoint committed.
        processed: the offset after the last processed record.
        position: the consumer's position (next offset it returns), if known.
        in_hand: records were fetched but are not processed yet.
    """
    if end is None:
        return None
    done = committed
    if position is not None and processed == committed and not in_hand:
        done = max(committed, position)
    return max(0, end - done)


async def input_progress(
    consumer: AIOKafkaConsumer, task: Task, in_hand: bool
) -> list[InputProgress]:
    """Each source partition of ``task``, as of the consumer's last fetch."""
    assigned = consumer.assignment()
    progress = []
    for tp in sorted(task.committed_offsets):
        committed: int = task.committed_offsets[tp]
        end: int | None = None
        position: int | None = None
        if tp in assigned:
            end = _end_offset(consumer, tp)
            position = await _position(consumer, tp)
        processed: int = task.next_offsets.get(tp, committed)
        lag = records_behind(end, committed, processed, position, in_hand)
        progress.append(InputProgress(tp.topic, committed, end, lag))
    return progress


def _end_offset(consumer: AIOKafkaConsumer, tp: Any) -> int | None:
    stable = consumer.last_stable_offset(tp)  # -1 under read_uncommitted
    end = stable if stable is not None and stable >= 0 else consumer.highwater(tp)
    return None if end is None else int(end)


async def _position(consumer: AIOKafkaConsumer, tp: Any) -> int | None:
    with contextlib.suppress(IllegalStateError, TimeoutError):
        return int(await asyncio.wait_for(consumer.position(tp), POSITION_WAIT_S))
    return None
