"""Driving the chat page in a browser as a visitor does: open a chat once its session is live, send."""

from __future__ import annotations

import time

REPLY = '[data-step-type="assistant_message"] .message-content'


def open_chat(browser, app, init_script: str | None = None):
    """A new page with the chat loaded and its socket connected (a message sent before is lost)."""
    page = browser.new_page(locale="zh-CN")
    if init_script:
        page.add_init_script(init_script)
    frames: list[tuple[float, str]] = []  # (time.monotonic() on arrival, text) of every socket frame
    page.on("websocket", lambda socket: socket.on(
        "framereceived", lambda frame: frames.append((time.monotonic(), str(frame)))))
    page.frames_received = frames
    page.goto(app.url)

    def chat_started() -> bool:  # the server ran on_chat_start for this socket and ended that task
        starts = [index for index, (_, frame) in enumerate(frames) if '"name":"on_chat_start"' in frame]
        return bool(starts) and any("task_end" in frame for _, frame in frames[starts[0]:])

    deadline = time.monotonic() + 60
    while not chat_started():
        assert time.monotonic() < deadline, "the chat session did not start"
        page.wait_for_timeout(100)
    page.wait_for_selector("#chat-input:not([disabled])", timeout=60_000)
    return page


def send(page, text: str) -> None:
    page.fill("#chat-input", text)
    page.click("#chat-submit")
