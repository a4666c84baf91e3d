"""What every engine does around a reply: the prompt rendered on a worker thread with the model's chat template
(old turns dropped to fit beside the reply; a message too long is refused), its tokens' text where the teaching
view asks for probabilities, and the engine's stream split into thinking and answer where the model thinks; and a
reply continued from tokens the teacher chose (the teaching view's branches)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import Any

from config.errors import MessageTooLongError
from config.message import Message
from config.settings import Settings
from engine.api import Finished, Refused, ReplyEvent, ReplyStats, Sampling, TextDelta
from engine.prompt import RenderedPrompt, render_prompt
from engine.thinking import ThinkingSplitter, split_thinking, splitter_for
from engine.token_text import with_pieces


def render_reply(tokenizer, system_prompt: str, history: list[Message], sampling: Sampling,
                  max_model_len: int) -> tuple[RenderedPrompt, ThinkingSplitter | None]:
    prompt = render_prompt(tokenizer, system_prompt, history, budget=max_model_len - sampling.max_new_tokens,
                           template_options={"enable_thinking": sampling.thinking})
    if sampling.logprobs:  # the teaching view shows the prompt's tokens too
        prompt = with_pieces(tokenizer, prompt)
    return prompt, splitter_for(tokenizer, prompt, sampling.thinking)


async def reply_events(tokenizer, max_model_len: int, system_prompt: str, history: list[Message], sampling: Sampling,
                       stream: Callable[[RenderedPrompt], AsyncIterator[TextDelta | Finished]]
                       ) -> AsyncIterator[ReplyEvent]:
    """`engine.api.ChatEngine.reply` for any engine whose `stream(prompt)` yields the reply's events: first the
    prompt (or `Refused`), then the events. Closing this closes, and so aborts, the engine's stream."""
    try:
        prompt, splitter = await asyncio.to_thread(render_reply, tokenizer, system_prompt, history, sampling,
                                                   max_model_len)
    except MessageTooLongError as error:
        yield Refused(str(error))
        return
    yield prompt
    events = stream(prompt)
    async with aclosing(split_thinking(events, splitter) if splitter else events) as split:
        async for event in split:
            yield event


async def continued_events(tokenizer, prompt: RenderedPrompt, start: Sequence[int], sampling: Sampling,
                           stream: Callable[[RenderedPrompt, Sampling], AsyncIterator[TextDelta | Finished]]
                           ) -> AsyncIterator[TextDelta | Finished]:
    """`engine.api.ChatEngine.continue_reply` for any engine whose `stream(prompt, sampling)` yields a reply's events:
    `start`'s text as one delta, then the model's continuation of the prompt followed by `start`, sent as token ids
    (the template's special tokens stay exact), within the reply's budget less `start`. A `start` that ends with a
    special token (the end of the turn) is a finished reply. Closing this closes, and so aborts, the stream."""
    text = await asyncio.to_thread(tokenizer.decode, list(start), skip_special_tokens=True)
    stats = ReplyStats(prompt_tokens=len(prompt.token_ids))
    yield TextDelta(text, stats, token_ids=tuple(start))
    if start[-1] in tokenizer.all_special_ids:
        yield Finished(replace(stats, finish_reason="stop"))
        return
    longer = RenderedPrompt(prompt.text + text, [*prompt.token_ids, *start], prompt.dropped_messages)
    async with aclosing(stream(longer, replace(sampling, max_new_tokens=max(1, sampling.max_new_tokens - len(start))))
                        ) as events:
        async for event in events:
            yield event


class StreamingEngine:
    """`ChatEngine.reply` and `continue_reply` for an engine that streams a rendered prompt's reply (`stream_reply`),
    with the model's `tokenizer` and the app's `settings`."""

    tokenizer: Any
    settings: Settings

    def stream_reply(self, prompt: RenderedPrompt, sampling: Sampling) -> AsyncIterator[TextDelta | Finished]:
        raise NotImplementedError

    def reply(self, system_prompt: str, history: list[Message], sampling: Sampling) -> AsyncIterator[ReplyEvent]:
        """The prompt, rendered on a worker thread, then `stream_reply`."""
        return reply_events(self.tokenizer, self.settings.max_model_len, system_prompt, history, sampling,
                            lambda prompt: self.stream_reply(prompt, sampling))

    def continue_reply(self, prompt: RenderedPrompt, start: Sequence[int], sampling: Sampling
                       ) -> AsyncIterator[TextDelta | Finished]:
        return continued_events(self.tokenizer, prompt, start, sampling, self.stream_reply)
