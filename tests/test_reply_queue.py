"""The line of replies: a limit, first come first served, places shown, no place lost to a cancelled wait."""

import asyncio

import pytest

from chat.reply_queue import ReplyQueue

pytestmark = pytest.mark.fast


async def test_limit_and_order_and_places():
    queue = ReplyQueue(limit=2)
    order, places = [], {}
    release = asyncio.Event()

    async def reply(name):
        async def show(place):
            places.setdefault(name, []).append(place)

        async with queue.turn(show):
            order.append(name)
            await release.wait()

    tasks = [asyncio.create_task(reply(name)) for name in "abcde"]
    await asyncio.sleep(0.1)
    assert order == ["a", "b"] and queue.running == 2 and queue.waiting == 3
    assert places == {"c": [1], "d": [2], "e": [3]}
    release.set()
    await asyncio.gather(*tasks)
    assert order == list("abcde") and queue.running == 0 and queue.waiting == 0


async def test_places_move_up_as_the_line_moves():
    queue = ReplyQueue(limit=1)
    finish = {name: asyncio.Event() for name in "abc"}
    places = []

    async def reply(name, show=None):
        async def record(place):
            if show:
                places.append(place)

        async with queue.turn(record):
            await finish[name].wait()

    tasks = [asyncio.create_task(reply("a")), asyncio.create_task(reply("b")), asyncio.create_task(reply("c", True))]
    await asyncio.sleep(0.1)
    finish["a"].set()
    await asyncio.sleep(0.7)  # longer than a place check
    assert places == [2, 1]
    finish["b"].set()
    finish["c"].set()
    await asyncio.gather(*tasks)


async def test_a_cancelled_wait_leaves_the_line_and_loses_no_place():
    queue = ReplyQueue(limit=1)
    hold = asyncio.Event()

    async def reply():
        async with queue.turn(lambda place: asyncio.sleep(0)):
            await hold.wait()

    first = asyncio.create_task(reply())
    waiting = asyncio.create_task(reply())
    await asyncio.sleep(0.1)
    waiting.cancel()  # a stop button or a closed tab while waiting
    await asyncio.sleep(0.1)
    assert queue.waiting == 0 and queue.running == 1
    hold.set()
    await first
    assert queue.running == 0
    async with queue.turn(lambda place: asyncio.sleep(0)):  # the place is free again at once
        assert queue.running == 1
