"""`python -m tests.socket_chat URL QUESTION`: one chat over Chainlit's socket, as a browser speaks it; prints
the reply's streamed text, its number of deltas and the token count the app reported, as JSON.

For tests that need a visitor where a browser cannot go (inside a network namespace without network).
"""

from __future__ import annotations

import asyncio
import json
import sys

from bench.ui_path import ChatClient


async def chat(url: str, question: str, timeout: float = 120) -> dict:
    client = ChatClient(url)
    await client.connect()
    await client.ask(question)
    await asyncio.wait_for(client.done.wait(), timeout)
    await client.socket.disconnect()
    return {"text": client.text, "deltas": len(client.token_times), "tokens": client.generated_tokens}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(chat(sys.argv[1], sys.argv[2])), ensure_ascii=False))
