"""A visitor over Chainlit's socket, as a browser speaks it, for tests that need no page.

`Visitor` keeps every event and each reply's text; `python -m tests.socket_chat URL QUESTION` runs one chat
and prints the reply's streamed text, its number of deltas and the token count the app reported, as JSON
(for tests that need a visitor where a browser cannot go: inside a network namespace without network).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time

from bench.ui_path import ChatClient


class Visitor(ChatClient):
    """A chat over the socket that keeps every event and the text of each reply."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.events: list[tuple[str, dict]] = []

    async def _on_event(self, event: str, data=None) -> None:
        self.events.append((event, data))
        await super()._on_event(event, data)

    async def ask_and_wait(self, question: str, timeout: float = 30) -> str:
        """The reply's whole text, once its footer arrived."""
        self.text = ""
        self.done.clear()
        await self.ask(question)
        await asyncio.wait_for(self.done.wait(), timeout)
        return self.text

    def errors(self) -> list[str]:
        return [data["output"] for event, data in self.events if event == "new_message" and data.get("isError")]

    def said(self, pattern: str) -> bool:
        return any(event == "new_message" and re.search(pattern, data.get("output", "")) for event, data in self.events)


async def until(condition, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def chat(url: str, question: str, timeout: float = 120) -> dict:
    client = ChatClient(url)
    await client.connect()
    await client.ask(question)
    await asyncio.wait_for(client.done.wait(), timeout)
    await client.socket.disconnect()
    return {"text": client.text, "deltas": len(client.token_times), "tokens": client.generated_tokens}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(chat(sys.argv[1], sys.argv[2])), ensure_ascii=False))
