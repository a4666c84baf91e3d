"""A reply shaped to be slow to finish (3,000 blank lines, as a small model caught in a loop writes) ends while
another chat streams: the other chat's words keep coming, the app's event loop never waits on the first one's end.
The real app over its sockets, on the scripted engine (`tests/fake_engine.py`)."""

from __future__ import annotations

import asyncio

import pytest

from harness.visitor import visit
from tests.fake_engine import BLANK_LINES, TOKEN_SECONDS
from tests.support import ARTIFACTS, FakeApp

pytestmark = pytest.mark.fast
REPLY_TOKENS = 200  # four seconds of words at the fake's pace


@pytest.fixture(scope="module")
def fake_app():
    ARTIFACTS.mkdir(exist_ok=True)
    with FakeApp(ARTIFACTS / "app-hostile-replies.log", CHAT_MAX_NEW_TOKENS=str(REPLY_TOKENS), CHAT_MAX_CONCURRENT_REPLIES="2",
                 CHAT_MAX_MODEL_LEN="2048") as running:
        yield running


async def test_a_reply_of_blank_lines_ends_while_another_chat_keeps_streaming(fake_app):
    streaming, looping = await visit(fake_app.url), await visit(fake_app.url)
    await streaming.ask("讲一个很长的故事")
    await asyncio.sleep(20 * TOKEN_SECONDS)
    await looping.ask_and_wait(f"{BLANK_LINES} 你好")
    assert looping.text.count("\n") >= 3000
    await asyncio.wait_for(streaming.done.wait(), 30)
    gaps = [later - earlier for earlier, later in zip(streaming.token_times, streaming.token_times[1:])]
    assert len(gaps) > 5 and max(gaps) < 1.0, f"the streaming chat waited {max(gaps):.2f} s between two updates"
    await asyncio.gather(streaming.socket.disconnect(), looping.socket.disconnect())
