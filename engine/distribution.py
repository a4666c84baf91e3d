"""The distribution vLLM's sampler draws a token from, rebuilt from the model's likeliest log-probabilities.

vLLM returns the model's own log-probabilities, before temperature, top-k, top-p and the repetition penalty, for
the `ALTERNATIVES` likeliest tokens at each place. The reshaped distribution is computed here as vLLM's sampler
does it (temperature, then the k likeliest and every token tied with the k-th, then the smallest set whose
probability reaches top-p, renormalised). It is exact at a place when that tie group ends among the tokens
returned (a token after it is seen to be less likely); approximate when it may go on past them (top-k off, or
tied up to the last token returned: with 16-bit logits ties are common), or when a repetition penalty moved the
logits first (not reproduced here).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from engine.api import Sampling

# The likeliest tokens asked for at each place: one more than the app's largest top-k (20, Qwen's advice), so a
# view at that top-k can see where its tie group ends. vLLM's engine allows 20 unless told more (`max_logprobs`).
ALTERNATIVES = 21


def _kept(logprobs: Sequence[float], top_k: int) -> int:
    """How many of `logprobs` (likeliest first) top-k keeps: the k likeliest and every one tied with the k-th."""
    if not top_k or top_k >= len(logprobs):
        return len(logprobs)
    return sum(1 for logprob in logprobs if logprob >= logprobs[top_k - 1])


def reshape(logprobs: Sequence[float], sampling: Sampling) -> list[float]:
    """The probabilities the sampler draws from at a temperature above 0, for `logprobs` sorted likeliest first."""
    scaled = [logprob / sampling.temperature for logprob in logprobs]
    kept = _kept(logprobs, sampling.top_k)
    weights = [math.exp(value - scaled[0]) for value in scaled[:kept]]
    total = sum(weights)
    cumulative, nucleus = 0.0, 0
    for weight in weights:  # the smallest set whose probability reaches top-p (at least one token)
        cumulative += weight / total
        nucleus += 1
        if cumulative >= sampling.top_p:
            break
    total = sum(weights[:nucleus])
    return [weight / total for weight in weights[:nucleus]] + [0.0] * (len(logprobs) - nucleus)


def exact(logprobs: Sequence[float], sampling: Sampling) -> bool:
    """Whether `reshape(logprobs, sampling)` is what the sampler drew from (see the module's docstring)."""
    if sampling.temperature == 0:
        return True
    return 0 < sampling.top_k and sampling.repetition_penalty == 1 and _kept(logprobs, sampling.top_k) < len(logprobs)
