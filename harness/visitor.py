"""A visitor over Chainlit's socket, as a browser speaks it: for tests that need no page, and the benchmark's UI path.

Each chat is a Socket.IO client speaking Chainlit's browser protocol (connect, `connection_successful`,
`client_message`), so what it sees includes the web server, the chat handlers, the live sidebar and the socket,
without a browser's rendering on the same cores. Times are taken when the `stream_token` events arrive; token
counts are the ones the app reports under each reply (its footer element). `python -m harness.visitor URL
QUESTION` runs one chat and prints the reply's streamed text, its number of deltas, the token count the app
reported and the reply as the app left it (with its sources), as JSON (for a visitor where a browser cannot go: inside a network namespace without network).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import uuid
from datetime import UTC, datetime

import httpx
import socketio

from harness.figures import Reply, summarise


class ChatClient:
    """One visitor's chat: a Chainlit session over Socket.IO."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, thread_id: str | None = None,
                 profile: str | None = None) -> None:
        self.url = url
        self.headers = headers or {}  # e.g. a login cookie, or an Origin
        self.thread_id = thread_id  # a stored conversation to resume
        self.profile = profile  # a persona (chat profile) other than the default
        self.socket = socketio.AsyncClient()
        self.session_id = str(uuid.uuid4())
        self.token_times: list[float] = []
        self.text = ""  # the streamed reply
        self.generated_tokens: int | None = None
        self.footer: dict = {}
        self.messages: list[dict] = []  # every message the app sent (new_message events)
        self.events: list[tuple[str, dict]] = []  # every event, in order
        self.started = asyncio.Event()
        self.done = asyncio.Event()
        self._notice = False  # the app's error notice came in the task running now (e.g. "the model wrote no answer")
        self._replies_before = 0  # replies on the page when the latest question was asked
        self._chat_start_seen = False
        self.socket.on("*", self._on_event)

    async def _on_event(self, event: str, data=None) -> None:
        self.events.append((event, data))
        if event in ("stream_start", "stream_token"):  # Chainlit sends a reply's first delta with its start
            self.token_times.append(time.perf_counter())
            self.text += data["output"] if event == "stream_start" else data["token"]
        elif event in ("new_message", "update_message") and data.get("name") == "on_chat_start":
            self._chat_start_seen = True
        elif event == "new_message":
            self.messages.append(data)
            self._notice = self._notice or bool(data.get("isError"))
            if "reply" in (data.get("metadata") or {}) and not self.text:  # a reply sent whole: the app's own
                self.text = data["output"]
        elif event == "resume_thread":  # a stored conversation was opened again: no chat start follows
            self._chat_start_seen = True
            self.started.set()
        elif event == "task_start":  # a notice of another task (a settings change) does not end the reply
            self._notice = False
        elif event == "task_end" and self._chat_start_seen:
            self.started.set()
            if self.generated_tokens is not None or self._notice:  # the reply's task is over
                self.done.set()
        elif event == "element" and data.get("name") == "ReplyFooter":
            self.footer = data["props"]  # the figures the app measured for the reply
            self.generated_tokens = data["props"]["generated_tokens"]

    async def connect(self) -> None:
        auth = {"sessionId": self.session_id, "clientType": "webapp"}
        if self.thread_id:
            auth["threadId"] = self.thread_id
        if self.profile:
            auth["chatProfile"] = self.profile
        await self.socket.connect(self.url, socketio_path="/ws/socket.io", transports=["websocket"],
                                  headers=dict(self.headers), auth=auth)
        await self.socket.emit("connection_successful")
        await asyncio.wait_for(self.started.wait(), 60)

    async def ask(self, question: str, command: str | None = None) -> None:
        """Send `question`, as the composer does (with one of the app's commands chosen, if `command`)."""
        self.generated_tokens = None
        self._notice = False
        self._replies_before = len(self.replies())
        await self.socket.emit("client_message", {"message": {
            "id": str(uuid.uuid4()), "threadId": "", "name": "User", "type": "user_message", "output": question,
            "createdAt": datetime.now(UTC).isoformat(), **({"command": command} if command else {})},
            "fileReferences": None})

    async def press(self, action: str, payload: dict) -> httpx.Response:
        """Press one of the app's buttons (a Chainlit action) as the page does, with an HTTP call in this session;
        returns once the app's handler has run."""
        async with httpx.AsyncClient(headers=self.headers, timeout=60) as client:
            return await client.post(f"{self.url}/project/action",
                                     json={"sessionId": self.session_id, "action": {"name": action, "payload": payload}})

    async def ask_and_wait(self, question: str, timeout: float = 30) -> str:
        """The reply's whole text, once its task ended (after its footer, or the app's error notice)."""
        self.text = ""
        self.done.clear()
        await self.ask(question)
        await asyncio.wait_for(self.done.wait(), timeout)
        return self.text

    def replies(self) -> list[str]:
        """Each reply's text as the app last sent it (a grounded one ends with its sources), oldest first."""
        last = {}
        for event, data in self.events:
            if event in ("new_message", "update_message") and "reply" in (data.get("metadata") or {}):
                last[data["id"]] = data["output"]
        return list(last.values())

    def latest_reply(self) -> str:
        """The reply to the latest question as the app last sent it; "" where it sent none (the model wrote no answer,
        and the app said so)."""
        replies = self.replies()
        return replies[-1] if len(replies) > self._replies_before else ""

    def elements(self) -> list[dict]:
        return [data for event, data in self.events if event == "element"]

    def errors(self) -> list[str]:
        return [data["output"] for event, data in self.events if event == "new_message" and data.get("isError")]

    def said(self, pattern: str) -> bool:
        return any(event == "new_message" and re.search(pattern, data.get("output", "")) for event, data in self.events)


async def visit(url: str, headers: dict[str, str] | None = None, thread_id: str | None = None,
                profile: str | None = None) -> ChatClient:
    """A visitor whose chat has started."""
    client = ChatClient(url, headers, thread_id, profile)
    await client.connect()
    return client


async def chat(url: str, question: str, headers: dict[str, str] | None = None, timeout: float = 120) -> ChatClient:
    """A visitor who asked one question and got the whole reply (still connected)."""
    client = await visit(url, headers)
    await client.ask(question)
    await asyncio.wait_for(client.done.wait(), timeout)
    return client


async def until(condition, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def serve(url: str, questions: list[str], timeout: float = 600) -> dict:
    """One chat per question connects, then all ask at once; returns the run's summary."""
    clients = [ChatClient(url) for _ in questions]
    await asyncio.gather(*(client.connect() for client in clients))
    arrival = time.perf_counter()
    await asyncio.gather(*(client.ask(question) for client, question in zip(clients, questions)))
    await asyncio.wait_for(asyncio.gather(*(client.done.wait() for client in clients)), timeout)
    await asyncio.gather(*(client.socket.disconnect() for client in clients))
    return summarise([Reply(client.token_times[0] - arrival, client.token_times[-1] - arrival,
                            client.generated_tokens) for client in clients])


async def _one_chat(url: str, question: str) -> dict:
    client = await chat(url, question)
    await client.socket.disconnect()
    return {"text": client.text, "deltas": len(client.token_times), "tokens": client.generated_tokens,
            "reply": client.latest_reply()}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_one_chat(sys.argv[1], sys.argv[2])), ensure_ascii=False))
