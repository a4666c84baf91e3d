"""The line of replies: a limit, first come first served, places shown, no place lost to a cancelled wait."""

import asyncio

import pytest

from chat.reply_line import ReplyLine

pytestmark = pytest.mark.fast


async def test_limit_and_order_and_places():
    line = ReplyLine(limit=2)
    order, places = [], {}
    release = asyncio.Event()

    async def reply(name):
        async def show(place):
            places.setdefault(name, []).append(place)

        async with line.place(show):
            order.append(name)
            await release.wait()

    tasks = [asyncio.create_task(reply(name)) for name in "abcde"]
    await asyncio.sleep(0.1)
    assert order == ["a", "b"] and line.running == 2 and line.waiting == 3
    assert places == {"c": [1], "d": [2], "e": [3]}
    release.set()
    await asyncio.gather(*tasks)
    assert order == list("abcde") and line.running == 0 and line.waiting == 0


async def test_places_move_up_as_the_line_moves():
    line = ReplyLine(limit=1)
    finish = {name: asyncio.Event() for name in "abc"}
    places = []

    async def reply(name, show=None):
        async def record(place):
            if show:
                places.append(place)

        async with line.place(record):
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
    line = ReplyLine(limit=1)
    hold = asyncio.Event()

    async def reply():
        async with line.place(lambda place: asyncio.sleep(0)):
            await hold.wait()

    first = asyncio.create_task(reply())
    waiting = asyncio.create_task(reply())
    await asyncio.sleep(0.1)
    waiting.cancel()  # a stop button or a closed tab while waiting
    await asyncio.sleep(0.1)
    assert line.waiting == 0 and line.running == 1
    hold.set()
    await first
    assert line.running == 0
    async with line.place(lambda place: asyncio.sleep(0)):  # the place is free again at once
        assert line.running == 1
