"""The teaching view's token views, for `public/elements/TokenView.jsx`: a reply's tokens with their probabilities
and likeliest alternatives, as the model gave them and as the sampling reshaped them (`engine.distribution`), and
the prompt's tokens with the template's special tokens marked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import chainlit as cl

from engine.api import RenderedPrompt, Sampling, TokenProbability
from engine.distribution import exact, reshape

SHOWN = 5  # of which the view shows
KEPT_VIEWS = 10  # a session's latest views whose buttons still work
T = TypeVar("T")


def _significant(probability: float) -> float:
    """Three significant digits: a token the model all but ruled out keeps a probability above 0."""
    return float(f"{probability:.3g}")


def _probability(logprob: float) -> float:
    return _significant(math.exp(logprob))


def _drawn_from(token: TokenProbability, sampling: Sampling) -> list[float]:
    if sampling.temperature == 0:  # greedy: the chosen token had it all, wherever a penalty moved it from
        return [float(other == token.token_id) for other, _, _ in token.top]
    return reshape([logprob for _, _, logprob in token.top], sampling)


@dataclass(frozen=True)
class Branchable:
    """A reply shown with its token view, from which the teacher can branch: its message's id, the prompt and sampling
    it was generated with, and its tokens."""

    reply_id: str
    prompt: RenderedPrompt
    sampling: Sampling
    tokens: list[TokenProbability]


class Recent(Generic[T]):
    """A session's latest views by element id, the last `KEPT_VIEWS` of them: an older view's button is answered
    with "no longer available", and a session does not grow without end."""

    def __init__(self) -> None:
        self._views: dict[str, T] = {}

    def add(self, element_id: str, value: T) -> None:
        self._views[element_id] = value
        for old in list(self._views)[:-KEPT_VIEWS]:
            del self._views[old]

    def get(self, element_id: object) -> T | None:
        """The view's value; None for an id not kept, or not a string (a button's payload comes from the page)."""
        return self._views.get(element_id) if isinstance(element_id, str) else None


WEIGH_PROMPT = "weigh_prompt"  # the action the prompt view's button calls
FORCE_TOKEN = "force_token"  # the action an alternative's button calls: a branch with that token in its place


def prompt_view(prompt: RenderedPrompt) -> cl.CustomElement:
    """The prompt's tokens, with a button that asks for their probabilities (`weighed_prompt`)."""
    element = cl.CustomElement(name="TokenView", display="inline", props={
        "title": "提示词的词元 The prompt's tokens", "action": WEIGH_PROMPT,
        "tokens": [{"id": token, "text": text, "special": token in prompt.special_ids}
                   for token, text in zip(prompt.token_ids, prompt.pieces)]})
    element.props["element"] = element.id
    return element


def weighed_prompt(element: cl.CustomElement, logprobs: Sequence[float | None]) -> None:
    """The prompt view with each token's probability after the ones before it (the first has none)."""
    element.props = {**element.props, "action": None, "tokens": [
        {**token, **({} if logprob is None else {"model_prob": _probability(logprob)})}
        for token, logprob in zip(element.props["tokens"], logprobs)]}


def token_view(tokens: Sequence[TokenProbability], sampling: Sampling, branch_from: int | None = None
               ) -> cl.CustomElement:
    """Each token with `prob`, its probability under the sampling used (the colour), `model_prob`, the model's, and
    whether `prob` is exact (`engine.distribution.exact`); its likeliest alternatives with both probabilities, each
    with a button that branches from there (`FORCE_TOKEN`). `branch_from`: the reply is a branch, its token at that
    index chosen by the teacher."""
    shown = []
    for token in tokens:
        after = _drawn_from(token, sampling)
        used = next((share for (other, _, _), share in zip(token.top, after) if other == token.token_id), 0.0)
        shown.append({"id": token.token_id, "text": token.piece, "prob": _significant(used),
                      "model_prob": _probability(token.logprob),
                      "exact": exact([logprob for _, _, logprob in token.top], sampling),
                      "top": [{"id": other, "text": text, "model_prob": _probability(logprob),
                               "prob": _significant(share)}
                              for (other, text, logprob), share in zip(token.top[:SHOWN], after)]})
    element = cl.CustomElement(name="TokenView", display="inline", props={
        "title": "回答的词元 The reply's tokens" if branch_from is None else
                 f"分支：第 {branch_from + 1} 个词元起由你选择 A branch: token {branch_from + 1} chosen by you",
        "tokens": shown, "force": FORCE_TOKEN, "branch_from": branch_from,
        "exact": all(token["exact"] for token in shown),
        "sampling": f"temperature {sampling.temperature:g} · top_k {sampling.top_k or 'off'} · top_p {sampling.top_p:g}"
                    f" · repetition_penalty {sampling.repetition_penalty:g}"})
    element.props["element"] = element.id
    return element


def forced(tokens: Sequence[TokenProbability], payload: dict) -> tuple[int, TokenProbability] | None:
    """What an alternative's button asks for (`payload`: the place `index` and the alternative's `token` id): that
    place and the alternative as a token there, with the same alternatives; None unless it is one of them."""
    index, token = payload.get("index"), payload.get("token")
    if type(index) is not int or type(token) is not int or not 0 <= index < len(tokens):
        return None
    place = tokens[index]
    return next(((index, TokenProbability(other, text, logprob, place.top)) for other, text, logprob in place.top
                 if other == token), None)
