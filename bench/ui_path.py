"""The full UI path: the running Chainlit app serving N chats, each over its own Chainlit socket.

Each chat is a Socket.IO client speaking Chainlit's browser protocol (connect, `connection_successful`,
`client_message`), so the figure includes the web server, the chat handlers, the live sidebar and the
socket, without a browser's rendering on the same cores. Times are taken when the `stream_token`
events arrive; token counts are the ones the app reports under each reply (its footer element).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, UTC

import socketio

from bench.workload import Reply, summarise


class ChatClient:
    """One visitor's chat: a Chainlit session over Socket.IO."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, thread_id: str | None = None) -> None:
        self.url = url
        self.headers = headers or {}  # e.g. a login cookie, or an Origin
        self.thread_id = thread_id  # a stored conversation to resume
        self.socket = socketio.AsyncClient()
        self.token_times: list[float] = []
        self.text = ""  # the streamed reply
        self.generated_tokens: int | None = None
        self.messages: list[dict] = []  # every message the app sent (new_message events)
        self.started = asyncio.Event()
        self.done = asyncio.Event()
        self._chat_start_seen = False
        self.socket.on("*", self._on_event)

    async def _on_event(self, event: str, data=None) -> None:
        if event in ("stream_start", "stream_token"):  # Chainlit sends a reply's first delta with its start
            self.token_times.append(time.perf_counter())
            self.text += data["output"] if event == "stream_start" else data["token"]
        elif event in ("new_message", "update_message") and data.get("name") == "on_chat_start":
            self._chat_start_seen = True
        elif event == "new_message":
            self.messages.append(data)
        elif event == "task_end" and self._chat_start_seen:
            self.started.set()
            if self.generated_tokens is not None:  # the reply's task is over: the page takes a question again
                self.done.set()
        elif event == "element" and data.get("name") == "ReplyFooter":
            self.generated_tokens = data["props"]["generated_tokens"]

    async def connect(self) -> None:
        auth = {"sessionId": str(uuid.uuid4()), "clientType": "webapp"}
        if self.thread_id:
            auth["threadId"] = self.thread_id
        await self.socket.connect(self.url, socketio_path="/ws/socket.io", transports=["websocket"],
                                  headers=dict(self.headers), auth=auth)
        await self.socket.emit("connection_successful")
        await asyncio.wait_for(self.started.wait(), 60)

    async def ask(self, question: str) -> None:
        self.generated_tokens = None
        await self.socket.emit("client_message", {"message": {
            "id": str(uuid.uuid4()), "threadId": "", "name": "User", "type": "user_message", "output": question,
            "createdAt": datetime.now(UTC).isoformat()}, "fileReferences": None})


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
