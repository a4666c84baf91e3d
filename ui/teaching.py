"""The teaching view in the chat: the prompt step above a reply (the passages retrieved and the exact text the chat
template produced, its tokens weighable) and a reply's token view, whose alternatives branch.
"""

from __future__ import annotations

import re

import chainlit as cl

from engine.api import RenderedPrompt, Sampling, TokenProbability
from ui.sources import Shown, passages_table
from ui.token_view import Branchable, Recent, prompt_view, token_view

REMOTE_TEACHING = ("ℹ️ 模型在 vLLM 服务器上运行（CHAT_ENGINE_URLS）：回答的词元视图、“选下一个词元”和对比暂不可用；分词可用。 "
                   "The model runs on vLLM servers (CHAT_ENGINE_URLS): the reply's token view, choosing the next "
                   "token and Compare are not available with them yet; Tokenize is.\n\n")


async def show_prompt(prompt: RenderedPrompt, sampling: Sampling, found: list[Shown] | None,
                      prompt_views: Recent[tuple[cl.CustomElement, RenderedPrompt]], token_views: bool) -> None:
    """The prompt step: the passages retrieved (`found`; None with the knowledge base off) and the exact text the
    chat template produced, special tokens included, its tokens in a view kept in `prompt_views` (its button weighs
    them). `token_views`: whether the engine shows tokens' probabilities; the step says so where it does not."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", prompt.text)), default=0))
    view = prompt_view(prompt) if prompt.pieces else None
    if view:
        prompt_views.add(view.id, (view, prompt))
    async with cl.Step(name="提示词 Prompt", type="tool", show_input=False, elements=[view] if view else None) as step:
        step.output = (
            ("" if token_views else REMOTE_TEACHING) +
            f"**{len(prompt.token_ids)} tokens** · temperature {sampling.temperature} · top_p {sampling.top_p} · "
            f"top_k {sampling.top_k} · repetition_penalty {sampling.repetition_penalty} · "
            f"max_new_tokens {sampling.max_new_tokens}\n\n"
            f"{'' if found is None else passages_table(found, prompt.text)}{fence}text\n{prompt.text}\n{fence}"
        )


def reply_token_view(branchable: Recent[Branchable], reply: cl.Message, prompt: RenderedPrompt, sampling: Sampling,
                     tokens: list[TokenProbability], branch_from: int | None = None) -> list[cl.CustomElement]:
    """A reply's token view (none without probabilities), kept in `branchable`, whose alternatives' buttons branch
    from it (`force_token`)."""
    if not tokens:
        return []
    view = token_view(tokens, sampling, branch_from)
    branchable.add(view.id, Branchable(reply.id, prompt, sampling, tokens))
    return [view]


async def show_unanswered(found: list[Shown]) -> None:
    """The step above a reply the app gave without the model: the passages found, none of whose sentences answers
    the question (`grounding.unanswered`)."""
    async with cl.Step(name="检索 Retrieval", type="tool", show_input=False) as step:
        step.output = ("资料里没有回答这个问题的句子：回答由应用直接给出，没有调用模型。 No sentence of the passages found answers "
                       "the question: the app says so itself, without asking the model.\n\n" +
                       "\n".join(f"- {passage.label} · BM25 {passage.score:.2f}" for passage in found))
