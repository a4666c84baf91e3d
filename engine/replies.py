"""What every engine does around a reply: the prompt rendered on a worker thread with the model's chat template
(old turns dropped to fit beside the reply; a message too long is refused), its tokens' text where the teaching
view asks for probabilities, and the engine's stream split into thinking and answer where the model thinks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing

from engine.api import Finished, Refused, ReplyEvent, Sampling, TextDelta
from config.errors import MessageTooLongError
from engine.prompt import Message, RenderedPrompt, render_prompt
from engine.thinking import ThinkingSplitter, split_thinking, splitter_for
from engine.token_text import with_pieces


def prepare_reply(tokenizer, system_prompt: str, history: list[Message], sampling: Sampling,
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
        prompt, splitter = await asyncio.to_thread(prepare_reply, tokenizer, system_prompt, history, sampling,
                                                   max_model_len)
    except MessageTooLongError as error:
        yield Refused(str(error))
        return
    yield prompt
    events = stream(prompt)
    async with aclosing(split_thinking(events, splitter) if splitter else events) as split:
        async for event in split:
            yield event
