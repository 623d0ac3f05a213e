"""The two reads of aiokafka's producer internals (eddy.runtime.producers), pinned
against the installed aiokafka: if an upgrade renames them, these fail here
instead of a fenced task going unnoticed or a stop hanging in production."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, ProducerFenced
from aiokafka.producer.transaction_manager import TransactionState

from eddy.runtime.producers import raise_if_failed, stop_within


@pytest.fixture
async def producer() -> AsyncIterator[AIOKafkaProducer]:
    # Never started: nothing connects to this address.
    made = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", transactional_id="t-0")
    yield made
    await AIOKafkaProducer.stop(made)


async def test_a_fenced_producer_raises_producer_fenced(producer: AIOKafkaProducer) -> None:
    raise_if_failed(producer)  # a new producer has not failed
    producer._txn_manager.state = TransactionState.FATAL_ERROR
    with pytest.raises(ProducerFenced):
        raise_if_failed(producer)


async def test_an_abortable_error_raises_a_kafka_error_to_reopen(
    producer: AIOKafkaProducer,
) -> None:
    producer._txn_manager.state = TransactionState.ABORTABLE_ERROR
    with pytest.raises(KafkaError, match="reopening"):
        raise_if_failed(producer)


async def test_a_producer_whose_stop_hangs_is_abandoned_in_time(
    producer: AIOKafkaProducer, caplog: pytest.LogCaptureFixture
) -> None:
    # What a lost coordinator does: the sender retries for ever, stop() waits on it.
    retrying = asyncio.create_task(asyncio.sleep(3600))
    producer._sender._sender_task = retrying

    async def stop_forever() -> None:
        await asyncio.sleep(3600)

    producer.stop = stop_forever
    started = time.monotonic()
    await stop_within(producer, 0.2, "clicks[3]")
    assert time.monotonic() - started < 2.0
    await asyncio.sleep(0)
    assert retrying.cancelled(), "the sender's retries must not go on in the background"
    assert "clicks[3]: the producer did not stop within 0 s; abandoning it" in caplog.text


async def test_a_producer_that_stops_is_stopped_quietly(
    producer: AIOKafkaProducer, caplog: pytest.LogCaptureFixture
) -> None:
    await stop_within(producer, 5.0, "clicks[3]")  # never started: stops at once
    assert "abandoning" not in caplog.text
