"""A chat message as every part passes it on: the engine renders it, retrieval searches it, history stores it.
Imports nothing of ours."""

from typing import Literal, TypedDict


class Message(TypedDict):
    role: Literal["user", "assistant"]
    content: str
