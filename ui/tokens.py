"""The teaching view's token views, for `public/elements/TokenView.jsx`: a reply's tokens with their probabilities
and likeliest alternatives, and the prompt's tokens with the template's special tokens marked."""

from __future__ import annotations

import math
from typing import Sequence

import chainlit as cl

from engine.api import RenderedPrompt, TokenProbability

ALTERNATIVES = 5  # the likeliest tokens shown at each place


def prompt_view(prompt: RenderedPrompt) -> cl.CustomElement:
    return cl.CustomElement(name="TokenView", display="inline", props={"title": "提示词的词元 The prompt's tokens", "tokens": [
        {"id": token, "text": text, "special": token in prompt.special_ids}
        for token, text in zip(prompt.token_ids, prompt.pieces)]})


def token_view(tokens: Sequence[TokenProbability]) -> cl.CustomElement:
    return cl.CustomElement(name="TokenView", display="inline", props={"title": "回答的词元 The reply's tokens", "tokens": [
        {"id": token.token_id, "text": token.piece, "prob": round(math.exp(token.logprob), 4),
         "top": [{"id": other, "text": text, "prob": round(math.exp(logprob), 4)} for other, text, logprob in token.top]}
        for token in tokens]})
