"""What every engine does before a reply, on a worker thread: the prompt rendered with the model's chat template
(old turns dropped to fit beside the reply), its tokens' text where the teaching view asks for probabilities,
and the thinking splitter the reply needs, if any."""

from __future__ import annotations

from engine.api import Sampling
from engine.prompt import Message, RenderedPrompt, render_prompt
from engine.thinking import ThinkingSplitter, splitter_for
from engine.tokens import with_pieces


def prepare_reply(tokenizer, system_prompt: str, history: list[Message], sampling: Sampling,
                  max_model_len: int) -> tuple[RenderedPrompt, ThinkingSplitter | None]:
    prompt = render_prompt(tokenizer, system_prompt, history, budget=max_model_len - sampling.max_new_tokens,
                           template_options={"enable_thinking": sampling.thinking})
    if sampling.logprobs:  # the teaching view shows the prompt's tokens too
        prompt = with_pieces(tokenizer, prompt)
    return prompt, splitter_for(tokenizer, prompt, sampling.thinking)
