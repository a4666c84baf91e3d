"""The thread-to-asyncio channel: order kept, end signalled, errors passed through, loop never blocked."""

import asyncio
import threading
import time

import pytest

from engine.bridge import Channel

pytestmark = pytest.mark.fast


def _produce(channel, items, error=None, delay=0.0):
    for item in items:
        time.sleep(delay)
        channel.put(item)
    channel.close(error)


async def test_items_arrive_in_order_then_end():
    channel = Channel(asyncio.get_running_loop())
    threading.Thread(target=_produce, args=(channel, list(range(100)))).start()
    batches = [batch async for batch in channel]
    assert [item for batch in batches for item in batch] == list(range(100))


async def test_producer_error_is_raised_in_the_consumer():
    channel = Channel(asyncio.get_running_loop())
    threading.Thread(target=_produce, args=(channel, ["a"], ValueError("boom"))).start()
    received = []
    with pytest.raises(ValueError, match="boom"):
        async for batch in channel:
            received.extend(batch)
    assert received == ["a"]


async def test_a_consumer_that_falls_behind_gets_what_queued_up_at_once():
    channel = Channel(asyncio.get_running_loop())
    _produce(channel, ["a", "b", "c"])  # all queued before the consumer looks
    assert [batch async for batch in channel] == [["a", "b", "c"]]


async def test_waiting_consumer_does_not_block_the_loop():
    channel = Channel(asyncio.get_running_loop())
    threading.Thread(target=_produce, args=(channel, range(5)), kwargs={"delay": 0.2}).start()
    ticks = 0

    async def tick():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    assert [batch async for batch in channel] == [[0], [1], [2], [3], [4]]  # kept up: one at a time
    ticker.cancel()
    assert ticks > 20  # about 100 in one second when nothing blocks
