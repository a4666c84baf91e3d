"""vLLM 0.30's CPU sampler without its passes over the whole vocabulary: most of a decode step here.

With the app's default sampling (a repetition penalty, top-k and top-p, as Qwen advises) vLLM's CPU sampler
works on every one of the 151,936 logits of every chat at every step, several times over: the penalty builds
two vocabulary-wide token counts per chat, the top-k/top-p sorts the row, and the draw puts random noise
on every token, though all but the top k are out by then (`python -m bench.profile`: half of a step at
eight chats in int8). Three replacements, each the same arithmetic on fewer numbers:

- `repetition_penalty`: the penalty on the tokens each chat has seen instead of a mask over the vocabulary
  (the logits come out bit for bit as vLLM's);
- `top_k_top_p`: the k largest logits instead of a sort, the nucleus found among them (the tokens kept and
  their logits are vLLM's; upstream's fix, vllm-project/vllm#32234, not in the CPU build we run);
- `draw`: vLLM's draw (the softmax's probabilities divided by exponential noise, the largest wins) over
  those k tokens only: each token is drawn with the same probability as by vLLM, from other random numbers;
- `greedy_rows_narrowed`: in a batch that mixes greedy and sampled chats (Compare: a greedy reply beside a hot one),
  vLLM draws for the greedy rows too and throws the draw away, and their top-k is the whole vocabulary, which
  sent the whole batch down vLLM's sort, slowing both replies. Their top-k is 1 for that draw.

One more is about the first reply that asks for log-probabilities (the teaching view), not speed: vLLM ranks the
chosen token with a function it compiles with torch.compile on first use, which held that reply's first token
back by seconds. `count_at_least` is the same comparison run as it is (a row of booleans the size of the
vocabulary), at a small share of a step. The figures: docs/design-figures.md.

Whatever they do not cover goes to vLLM's own code. `SamplerSpeedup` is a vLLM worker extension: vLLM adds
its method to the worker in the process that runs the model, and the engine calls it there once
(`collective_rpc`) to put these in place of vLLM's, whose names and contracts it checks first.
"""

from __future__ import annotations

from dataclasses import replace
from types import MethodType

import torch

# Beyond this top-k the window is no cheaper than a sort, and vLLM's own path runs.
MAX_WINDOW = 1024
GREEDY_BELOW = 1e-5  # vLLM's `_SAMPLING_EPS`: a temperature below it is greedy


def repetition_penalty(logits: torch.Tensor, prompt_token_ids: torch.Tensor, presence: torch.Tensor,
                       frequency: torch.Tensor, repetition: torch.Tensor, output_token_ids: list[list[int]],
                       fallback) -> torch.Tensor:
    """vLLM's `apply_all_penalties` (arguments as its own, `logits` updated in place) for rows with no presence
    or frequency penalty: each token a row has seen in its prompt (padded with the vocabulary's size) or its
    output (-1 where not known yet) is divided by the row's penalty where positive, multiplied where not, as
    vLLM does; `fallback` (vLLM's function) when a presence or frequency penalty is set."""
    if bool(presence.any()) or bool(frequency.any()):
        return fallback(logits, prompt_token_ids, presence, frequency, repetition, output_token_ids)
    vocab = logits.shape[1]
    for row, penalty in enumerate(repetition):
        if penalty == 1.0:  # vLLM multiplies by 1.0: nothing changes
            continue
        seen = torch.cat([prompt_token_ids[row], torch.tensor(output_token_ids[row], dtype=prompt_token_ids.dtype)])
        seen = seen[(seen >= 0) & (seen < vocab)]  # repeats are written twice with the same value
        values = logits[row, seen]
        logits[row, seen] = values * torch.where(values > 0, 1.0 / penalty, penalty)
    return logits


def _window(logits: torch.Tensor, k: torch.Tensor | None,
            p: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Each row's top `max(k)` logits, and every logit tied with a row's k-th (vLLM keeps them all: frequent
    with 16-bit logits), with those vLLM's top-k/top-p drops set to -inf, and their indices in the vocabulary;
    None for what this does not cover: no top-k or top-p, or more than `MAX_WINDOW` logits to keep in a row.
    Among logits tied at top-p's edge, which ones stay is arbitrary, for vLLM's sort as for this."""
    if k is None or p is None:
        return None
    window = int(k.max())
    if window > MAX_WINDOW:
        return None
    values, indices = logits.topk(window, dim=-1)  # descending
    threshold = values.gather(1, (k.long() - 1).unsqueeze(1))
    kept = int((logits >= threshold).sum(dim=-1).max())
    if kept > MAX_WINDOW:
        return None
    if kept > window:
        values, indices = logits.topk(kept, dim=-1)
    ascending = values.flip(-1).masked_fill(values.flip(-1) < threshold, -float("inf"))
    cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
    drop = cumulative <= 1 - p.unsqueeze(dim=1)
    drop[:, -1] = False  # the likeliest token always stays
    return ascending.masked_fill(drop, -float("inf")).flip(-1), indices


def top_k_top_p(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None, fallback) -> torch.Tensor:
    """Mask `logits` (rows of a batch, updated in place) to each row's top `k`, then to the smallest set of
    those whose probability reaches `p`, as vLLM does; `fallback` (vLLM's function) for what `_window` does
    not cover."""
    window = _window(logits, k, p)
    if window is None:
        return fallback(logits, k, p)
    kept, indices = window
    return logits.fill_(-float("inf")).scatter_(1, indices, kept)


def greedy_rows_narrowed(metadata):
    """vLLM's `SamplingMetadata` with the top-k of its greedy rows set to 1 in a batch that also samples (vLLM takes
    their argmax, not the draw); as it is otherwise."""
    if metadata.all_random or metadata.all_greedy or metadata.top_k is None or metadata.temperature is None:
        return metadata
    greedy = metadata.temperature < GREEDY_BELOW
    return replace(metadata, top_k=torch.where(greedy, 1, metadata.top_k)) if bool(greedy.any()) else metadata


def draw(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> torch.Tensor | None:
    """One token per row, drawn as vLLM's CPU sampler draws after its top-k/top-p, over each row's window
    instead of the vocabulary; None for what `_window` does not cover."""
    window = _window(logits, k, p)
    if window is None:
        return None
    kept, indices = window
    probabilities = kept.softmax(dim=-1, dtype=torch.float32)
    chosen = probabilities.div_(torch.empty_like(probabilities).exponential_()).argmax(dim=-1, keepdim=True)
    return indices.gather(1, chosen).view(-1)


def count_at_least(x: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """vLLM's `batched_count_greater_than`, without torch.compile: per row, the elements at least its value."""
    return (x >= values).sum(-1)


class SamplerSpeedup:
    """Mixed into vLLM's worker (`worker_extension_cls`); `install_sampler_speedup` runs in its process."""

    def install_sampler_speedup(self) -> bool:
        """Put the functions above in place of vLLM's in this worker's sampler, once: True when they are in
        place, False (and vLLM's own left in place) where vLLM's are not the ones this was written against."""
        from vllm.v1.sample import sampler as vllm_sampler
        from vllm.v1.sample.ops import topk_topp_sampler

        chooser = self.model_runner.sampler.topk_topp_sampler
        if getattr(chooser.forward, "__name__", "") == "fast_sample":
            return True
        known = (getattr(vllm_sampler.apply_all_penalties, "__name__", "") == "apply_all_penalties"
                 and getattr(topk_topp_sampler.apply_top_k_top_p, "__name__", "") == "apply_top_k_top_p"
                 and getattr(chooser.forward, "__func__", None) is topk_topp_sampler.TopKTopPSampler.forward_cpu
                 and hasattr(vllm_sampler, "batched_count_greater_than")
                 and getattr(vllm_sampler, "_SAMPLING_EPS", None) == GREEDY_BELOW
                 and getattr(self.model_runner.sampler.sample, "__func__", None) is vllm_sampler.Sampler.sample)
        if not known:
            return False
        penalties, masking, sample = vllm_sampler.apply_all_penalties, topk_topp_sampler.apply_top_k_top_p, \
            chooser.forward
        whole_sample = self.model_runner.sampler.sample

        def narrowed_sample(sampler, logits, sampling_metadata, *args, **kwargs):
            return whole_sample(logits, greedy_rows_narrowed(sampling_metadata), *args, **kwargs)

        def fast_penalties(logits, prompt_token_ids, presence, frequency, repetition, output_token_ids):
            return repetition_penalty(logits, prompt_token_ids, presence, frequency, repetition, output_token_ids,
                                      penalties)

        def fast_top_k_top_p(logits, k, p):
            return top_k_top_p(logits, k, p, masking)

        def fast_sample(sampler, logits, generators, k, p):
            # vLLM's own where a chat has its own random seed or processed log-probabilities are asked for.
            if generators or sampler.use_fp64_gumbel or sampler.logprobs_mode in ("processed_logits",
                                                                                  "processed_logprobs"):
                return sample(logits, generators, k, p)
            tokens = draw(logits, k, p)
            return sample(logits, generators, k, p) if tokens is None else (tokens, None)

        vllm_sampler.apply_all_penalties = fast_penalties
        topk_topp_sampler.apply_top_k_top_p = fast_top_k_top_p
        vllm_sampler.batched_count_greater_than = count_at_least
        chooser.forward = MethodType(fast_sample, chooser)
        self.model_runner.sampler.sample = MethodType(narrowed_sample, self.model_runner.sampler)
        return True
