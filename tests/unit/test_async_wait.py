"""The async I/O queue: order, watermark barriers and capacity, with calls that
the test finishes by hand in a chosen order (no sleeps, no clock)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eddy.eventtime.async_wait import AsyncWaitQueue, Result, Watermark


def values(released: list[Result[int] | Watermark]) -> list[int | str]:
    return [r.value if isinstance(r, Result) else f"wm{r.watermark_ms}" for r in released]


async def test_ordered_holds_results_behind_a_slow_call() -> None:
    loop = asyncio.get_running_loop()
    queue: AsyncWaitQueue[int] = AsyncWaitQueue(10, ordered=True)
    calls = [loop.create_future() for _ in range(3)]
    for call in calls:
        await queue.put(call)
    calls[2].set_result(2)
    calls[1].set_result(1)
    await asyncio.sleep(0)
    assert queue.take() == []  # the first call is still pending
    calls[0].set_result(0)
    await asyncio.sleep(0)
    assert values(queue.take()) == [0, 1, 2]


async def test_unordered_releases_on_completion_but_never_across_a_watermark() -> None:
    loop = asyncio.get_running_loop()
    queue: AsyncWaitQueue[int] = AsyncWaitQueue(10, ordered=False)
    before = [loop.create_future() for _ in range(2)]
    for call in before:
        await queue.put(call)
    queue.put_watermark(100)
    after = loop.create_future()
    await queue.put(after)
    after.set_result(9)
    before[1].set_result(1)
    await asyncio.sleep(0)
    assert values(queue.take()) == [1]  # 9 waits behind the watermark
    before[0].set_result(0)
    await asyncio.sleep(0)
    assert values(queue.take()) == [0, "wm100", 9]


async def test_put_waits_for_room_and_never_starts_a_call_beyond_capacity() -> None:
    loop = asyncio.get_running_loop()
    queue: AsyncWaitQueue[int] = AsyncWaitQueue(2, ordered=True)
    first, second = loop.create_future(), loop.create_future()
    await queue.put(first)
    await queue.put(second)
    started: list[int] = []

    async def third() -> int:
        started.append(3)
        return 3

    blocked = asyncio.ensure_future(queue.put(third))
    await asyncio.sleep(0.01)
    assert not blocked.done()
    assert started == []
    first.set_result(1)
    await blocked
    assert queue.in_flight == 2
    second.set_result(2)
    assert values(await queue.drain()) == [1, 2, 3]
    assert queue.in_flight == 0


async def test_cancel_drops_every_call() -> None:
    loop = asyncio.get_running_loop()
    queue: AsyncWaitQueue[int] = AsyncWaitQueue(5, ordered=False)
    call = loop.create_future()
    await queue.put(call)
    queue.cancel()
    assert call.cancelled()
    assert queue.in_flight == 0
    assert await queue.drain() == []


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity"):
        AsyncWaitQueue(0, ordered=True)


# A run: each step puts a call or a watermark; calls finish in a random order.
steps = st.lists(st.one_of(st.just("call"), st.just("watermark")), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(steps=steps, ordered=st.booleans(), capacity=st.integers(1, 6), data=st.data())
def test_releases_respect_order_barriers_and_capacity(
    steps: list[str], ordered: bool, capacity: int, data: st.DataObject
) -> None:
    asyncio.run(_run(steps, ordered, capacity, data))


async def _run(steps: list[str], ordered: bool, capacity: int, data: st.DataObject) -> None:
    loop = asyncio.get_running_loop()
    queue: AsyncWaitQueue[int] = AsyncWaitQueue(capacity, ordered=ordered)
    pending: list[tuple[int, asyncio.Future[int]]] = []
    released: list[Result[int] | Watermark] = []
    segment_of: dict[int, int] = {}
    segment, watermark_ms, n = 0, 0, 0
    for step in steps:
        if step == "watermark":
            watermark_ms += 10
            queue.put_watermark(watermark_ms)
            segment += 1
            continue
        while queue.in_flight >= capacity:  # finish some call to make room, at random
            index = data.draw(st.integers(0, len(pending) - 1))
            value, future = pending.pop(index)
            future.set_result(value)
            await asyncio.sleep(0)
            released += queue.take()
        future = loop.create_future()
        await queue.put(future)
        assert queue.in_flight <= capacity
        pending.append((n, future))
        segment_of[n] = segment
        n += 1
        released += queue.take()
    for index in data.draw(st.permutations(range(len(pending)))):
        value, future = pending[index]
        future.set_result(value)
        await asyncio.sleep(0)
        released += queue.take()
    released += await queue.drain()

    results = [r.value for r in released if isinstance(r, Result)]
    assert sorted(results) == list(range(n))  # each result exactly once
    if ordered:
        assert results == list(range(n))
    # No result is released after a later watermark, nor before an earlier one.
    seen_watermarks = 0
    for item in released:
        if isinstance(item, Watermark):
            seen_watermarks += 1
        else:
            assert segment_of[item.value] == seen_watermarks
    assert [w.watermark_ms for w in released if isinstance(w, Watermark)] == list(
        range(10, watermark_ms + 1, 10)
    )
