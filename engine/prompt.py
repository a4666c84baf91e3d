"""Render a conversation into the model's prompt with the model's own chat template.

A pure function of (tokenizer, system prompt, history, budget, template options): no engine, no UI.
When the conversation does not fit the token budget, whole turns are dropped from the oldest end; the
system prompt and the newest user message are never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from config.errors import ConfigError, MessageTooLongError
from config.message import Message


class ChatTokenizer(Protocol):
    def apply_chat_template(self, conversation: list[dict[str, str]], **kwargs: Any) -> Any: ...

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...


@dataclass(frozen=True)
class RenderedPrompt:
    text: str  # the exact prompt, special tokens included
    token_ids: list[int]
    dropped_messages: int  # how many of the oldest history messages were left out to fit
    pieces: tuple[str, ...] = ()  # each token's text (`engine.token_text`), for the teaching view
    special_ids: frozenset[int] = frozenset()  # which of its tokens are the template's special tokens


def render_prompt(
    tokenizer: ChatTokenizer,
    system_prompt: str,
    history: Sequence[Message],
    budget: int,
    template_options: dict[str, Any] | None = None,
) -> RenderedPrompt:
    """Render `history` (ending with the newest user message) into at most `budget` prompt tokens."""
    if not history or history[-1]["role"] != "user":
        raise ValueError("history must end with the newest user message")
    turn_starts = [index for index, message in enumerate(history) if message["role"] == "user"]

    def render(start: int) -> tuple[str, list[int]]:
        conversation = [{"role": "system", "content": system_prompt}, *history[start:]]
        text = tokenizer.apply_chat_template(
            conversation, tokenize=False, add_generation_prompt=True, **(template_options or {})
        )
        return text, tokenizer.encode(text, add_special_tokens=False)

    # Fewer turns never take more tokens, so the earliest turn that fits is found by bisection: a long
    # conversation costs a few renderings, not one per turn.
    low, high = 0, len(turn_starts) - 1
    text, token_ids = render(turn_starts[high])
    if len(token_ids) > budget:
        instructions = len(token_ids) - len(tokenizer.encode(history[-1]["content"]))  # `token_ids`: the newest turn
        if instructions >= budget:  # not the visitor's message: the instructions and the reply's budget
            raise MessageTooLongError(
                f"回答长度的上限太大，放不下角色的说明：请在设置里调低“回答最长 tokens”。 The reply's budget leaves no room "
                f"for the persona's instructions ({instructions} tokens; {budget} fit beside the reply): lower "
                "\"Max new tokens\" in the chat settings.")
        raise MessageTooLongError(
            f"这条消息太长：加上说明共需 {len(token_ids)} 个词元，但回答之外只放得下 {budget} 个。请缩短或分成几条发送。 "
            f"This message is too long: with the instructions it needs {len(token_ids)} tokens, but only {budget} fit "
            "beside the reply. Please shorten it or split it into several messages."
        )
    while low < high:  # turn_starts[high] fits, and `text` is its rendering
        middle = (low + high) // 2
        candidate = render(turn_starts[middle])
        if len(candidate[1]) <= budget:
            high, (text, token_ids) = middle, candidate
        else:
            low = middle + 1
    return RenderedPrompt(text=text, token_ids=token_ids, dropped_messages=turn_starts[high])


FIT_QUESTION = "你好，请介绍一下你自己。"  # a short question every persona must have room for


def check_fits(tokenizer: ChatTokenizer, system_prompts: dict[str, str], max_model_len: int,
               max_new_tokens: int) -> None:
    """Raise `ConfigError` with what to set unless each persona's system prompt (by name), a short question and a
    reply of `max_new_tokens` fit in `max_model_len` tokens: otherwise every visitor's question would be refused."""
    for name, system_prompt in system_prompts.items():
        needed = len(render_prompt(tokenizer, system_prompt, [{"role": "user", "content": FIT_QUESTION}],
                                   budget=10 ** 9).token_ids)
        if needed + max_new_tokens > max_model_len:
            raise ConfigError(
                f"The persona {name!r} needs {needed} tokens for its instructions and a short question, and replies "
                f"take up to CHAT_MAX_NEW_TOKENS={max_new_tokens}: that is more than CHAT_MAX_MODEL_LEN={max_model_len}. "
                f"Set CHAT_MAX_MODEL_LEN to at least {needed + max_new_tokens}, lower CHAT_MAX_NEW_TOKENS to at most "
                f"{max(0, max_model_len - needed)}, or shorten the persona's system prompt.")
