"""What the model sees of one chat: the visitor's questions and the assistant's replies, in order, each with
the id of the message that shows it.

A question asked again under an id already in the conversation is an edit: everything from that
question on is dropped first, as the page drops it. Beyond `MAX_TURNS` the oldest turns are forgotten: the
prompt holds only what fits the model's context, and a chat that runs for days must not grow without end. `from_steps` rebuilds a conversation from the steps
a thread stored: user messages and the app's replies (marked with `REPLY` in their metadata) only, never
notices, errors, the teaching step, replies set aside (`SET_ASIDE`), Chainlit's "Task manually stopped." line, nor
the lines the app put under a reply (its sources, the check of its figures: `APPENDED`). The model is not shown a
question the app answered itself (`BY_APP`: the documents do not answer it) nor that reply (`model_messages`): given
them, the demo models repeated "资料里没有这方面的信息" to later questions the passages did answer. Plain data; knows
nothing of Chainlit or the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from config.message import Message

REPLY = "reply"  # the metadata key that marks a message as one of the assistant's replies
SET_ASIDE = "set_aside"  # marks a reply the conversation does not hold: a branch, or a reply the teacher swapped out
SOURCES = "sources"  # in a reply's REPLY metadata: the passages it drew on
SOURCES_MARK = "\n\n📚 来源 Sources："  # a reply's text ends with this line when it has sources
UNSUPPORTED_MARK = "\n⚠️ 资料中未见 not in the sources："  # then the figures and names of the reply they do not hold
UNCHECKED = ("\n\nℹ️ 未经资料核对 Not checked against any source：导览资料里没有找到这个回答的出处 "
             "nothing in the guide's documents backs this reply")  # ends a reply that drew on no passage
FINISH = "finish"  # in a reply's REPLY metadata: why it ended
BY_APP = "not_covered"  # the FINISH of a reply the app gave without the model: the documents do not answer the question
APPENDED = "appended"  # in a reply's REPLY metadata: how many characters the app put under what the model said
MAX_TURNS = 400  # questions and replies kept for the model; far more than any context here holds


def model_text(text: str) -> str:
    """A reply's text as the page shows it, without the lines the app put under it (for readers of the page)."""
    return re.split(f"{re.escape(SOURCES_MARK)}|{re.escape(UNCHECKED)}", text, maxsplit=1)[0]


@dataclass(frozen=True)
class Turn:
    message_id: str
    role: Literal["user", "assistant"]
    content: str
    by_app: bool = False  # a reply the app gave without the model


class Conversation:
    def __init__(self, turns: list[Turn] | None = None) -> None:
        self.turns = turns or []

    def ask(self, message_id: str, text: str) -> bool:
        """Add a question; returns True if it was an edit of an earlier one (and the conversation rewound)."""
        edited = self.rewind(message_id)
        self.turns.append(Turn(message_id, "user", text))
        del self.turns[:-MAX_TURNS]
        return edited

    def answer(self, message_id: str, text: str, by_app: bool = False) -> None:
        self.turns.append(Turn(message_id, "assistant", text, by_app))
        del self.turns[:-MAX_TURNS]

    def rewind(self, message_id: str) -> bool:
        """Drop the message `message_id` and everything after it, if it is here."""
        for index, turn in enumerate(self.turns):
            if turn.message_id == message_id:
                del self.turns[index:]
                return True
        return False

    def messages(self) -> list[Message]:
        """Every question and reply: what the chat asked and was told (the search reads it)."""
        return [{"role": turn.role, "content": turn.content} for turn in self.turns]

    def model_messages(self) -> list[Message]:
        """The history the model is given: the questions and replies, less those the app answered itself."""
        answered_by_app = {index - 1 for index, turn in enumerate(self.turns) if turn.by_app}
        return [{"role": turn.role, "content": turn.content} for index, turn in enumerate(self.turns)
                if not turn.by_app and index not in answered_by_app]

    @classmethod
    def from_steps(cls, steps: list[dict]) -> Conversation:
        """The conversation a thread's stored steps hold (in the order they were created)."""
        turns = []
        for step in sorted(steps, key=lambda step: step.get("createdAt") or ""):
            if step.get("type") == "user_message":
                turns.append(Turn(step["id"], "user", step.get("output") or ""))
            elif step.get("type") == "assistant_message" and REPLY in (metadata := step.get("metadata") or {}):
                text = step.get("output") or ""  # what the model said, without the lines put under it
                if appended := metadata[REPLY].get(APPENDED):
                    text = text[:-appended]
                elif metadata[REPLY].get(SOURCES):  # stored before the check: only a sources line
                    text = text.rsplit(SOURCES_MARK, 1)[0]
                turns.append(Turn(step["id"], "assistant", text, metadata[REPLY].get(FINISH) == BY_APP))
        return cls(turns[-MAX_TURNS:])
