"""The distribution vLLM's sampler draws a token from, rebuilt from the model's likeliest log-probabilities.

vLLM returns the model's own log-probabilities, before temperature, top-k, top-p and the repetition penalty, for
at most the 20 likeliest tokens at each place. The reshaped distribution is computed here as vLLM's sampler does
it (temperature, then the k likeliest, then the smallest set whose probability reaches top-p, renormalised): exact
when top-k keeps at most those 20 tokens, approximate when top-k is off (the rest of the vocabulary is unknown)
or when a repetition penalty moved the logits first (not reproduced here).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from engine.api import Sampling

ALTERNATIVES = 20  # the likeliest tokens asked for at each place (vLLM's most)


def reshape(logprobs: Sequence[float], sampling: Sampling) -> list[float]:
    """The probabilities the sampler draws from at a temperature above 0, for `logprobs` sorted likeliest first."""
    scaled = [logprob / sampling.temperature for logprob in logprobs]
    kept = len(scaled) if not sampling.top_k else min(sampling.top_k, len(scaled))
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


def exact(sampling: Sampling) -> bool:
    """Whether `reshape` is what the sampler drew from (see the module's docstring)."""
    return sampling.temperature == 0 or (0 < sampling.top_k <= ALTERNATIVES and sampling.repetition_penalty == 1)
