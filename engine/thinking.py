"""Thinking models: whether a chat template can think, and a reply split into its thinking and its answer by
vLLM's own reasoning parsers (`qwen3`, `deepseek_r1`), one parser per reply.

A Qwen3-style template has a switch, `enable_thinking`: with it on the model writes `<think>…</think>` before
its answer. An R1-style template opens `<think>` in the generation prompt itself: the model always thinks
first. Each parser is fed every delta's text and token ids as vLLM's own server feeds it, so `<think>` and
`</think>` may fall anywhere in a delta.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import replace
from pathlib import Path

from engine.api import Finished, TextDelta
from engine.prompt import RenderedPrompt

SWITCH = "enable_thinking"


def has_switch(model: Path) -> bool:
    """Whether the model folder's chat template has Qwen3's thinking switch."""
    folder = Path(model)
    template = folder / "chat_template.jinja"
    if template.is_file():
        return SWITCH in template.read_text()
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return False
    return SWITCH in str(config.get("chat_template") or "")


def parser_name(chat_template: str | None, prompt_text: str, thinking: bool) -> str | None:
    """The reasoning parser a reply needs: R1's when the prompt leaves `<think>` open, Qwen3's when the template
    has the switch and it is on, none otherwise (the template then asks for no thinking)."""
    if prompt_text.rstrip().endswith("<think>"):
        return "deepseek_r1"
    if thinking and SWITCH in (chat_template or ""):
        return "qwen3"
    return None


def splitter_for(tokenizer, prompt: RenderedPrompt, thinking: bool) -> ThinkingSplitter | None:
    """The splitter a reply to `prompt` needs, if any (building one reads the vocabulary: off the event loop)."""
    name = parser_name(tokenizer.chat_template, prompt.text, thinking)
    return ThinkingSplitter(tokenizer, name, prompt.token_ids) if name else None


class ThinkingSplitter:
    """One reply's parser: each delta becomes its thinking part, its answer part, or both."""

    def __init__(self, tokenizer, name: str, prompt_token_ids: list[int]) -> None:
        from vllm.reasoning import ReasoningParserManager

        self._parser = ReasoningParserManager.get_reasoning_parser(name)(tokenizer)
        self._parser.adjust_initial_state_from_prompt(prompt_token_ids)
        self._text = ""
        self._token_ids: list[int] = []

    def split(self, delta: TextDelta) -> list[TextDelta]:
        text, token_ids = self._text + delta.text, [*self._token_ids, *delta.token_ids]
        message = self._parser.extract_reasoning_streaming(self._text, text, delta.text, self._token_ids, token_ids,
                                                            delta.token_ids)
        self._text, self._token_ids = text, token_ids
        return self._parts(delta, message)

    def finish(self, last: TextDelta) -> list[TextDelta]:
        """What the parser still holds at the end of the reply."""
        finish = getattr(self._parser, "finish_streaming", None)
        return self._parts(replace(last, token_ids=()), finish() if finish else None)

    @staticmethod
    def _parts(delta: TextDelta, message) -> list[TextDelta]:
        parts = [(kind, text) for kind, text in (("thinking", message and message.reasoning),
                                                 ("answer", message and message.content)) if text]
        # A delta split in two keeps no token ids: the parser does not say which tokens went where. Its tokens'
        # probabilities go with its first part.
        return [replace(delta, text=text, kind=kind, token_ids=delta.token_ids if len(parts) == 1 else (),
                        logprobs=delta.logprobs if index == 0 else ())
                for index, (kind, text) in enumerate(parts)]


async def split_thinking(events: AsyncIterator[TextDelta | Finished],
                         splitter: ThinkingSplitter) -> AsyncIterator[TextDelta | Finished]:
    """`events` with every text delta split into thinking and answer; closing this closes `events`."""
    last = None
    async with aclosing(events):
        async for event in events:
            if isinstance(event, TextDelta):
                last = event
                for part in splitter.split(event):
                    yield part
            else:
                for part in splitter.finish(last) if last else []:
                    yield part
                yield event
