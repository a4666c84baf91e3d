"""The thread-to-asyncio channel: order kept, end signalled, errors passed through, loop never blocked."""

import asyncio
import threading
import time

import pytest

from engine.bridge import Channel


def _produce(channel, items, error=None, delay=0.0):
    for item in items:
        time.sleep(delay)
        channel.put(item)
    channel.close(error)


async def test_items_arrive_in_order_then_end():
    channel = Channel(asyncio.get_running_loop())
    threading.Thread(target=_produce, args=(channel, list(range(100)))).start()
    assert [item async for item in channel] == list(range(100))


async def test_producer_error_is_raised_in_the_consumer():
    channel = Channel(asyncio.get_running_loop())
    threading.Thread(target=_produce, args=(channel, ["a"], ValueError("boom"))).start()
    received = []
    with pytest.raises(ValueError, match="boom"):
        async for item in channel:
            received.append(item)
    assert received == ["a"]


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
    assert [item async for item in channel] == list(range(5))
    ticker.cancel()
    assert ticks > 20  # about 100 in one second when nothing blocks
