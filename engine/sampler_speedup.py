"""Top-k and top-p without sorting the vocabulary: the step vLLM 0.30's CPU sampler spends most on.

With both top-k and top-p set (the app's defaults, as Qwen advises), vLLM's CPU sampler sorts every row of
logits, 151,936 of them per chat and step, to find a nucleus inside the top k: a quarter of a decode step
at eight chats here (`python -m bench.profile`). `top_k_top_p` takes the k largest instead and finds the
nucleus among them; the tokens kept, their order of drawing and their logits are vLLM's. It is the fix vLLM
took upstream (vllm-project/vllm#32234), not yet in the CPU build we run.

`SamplerSpeedup` is a vLLM worker extension: vLLM adds its method to the worker in the process that runs
the model, and the engine calls it there once (`collective_rpc`) to put `top_k_top_p` in place of vLLM's
function, whose name and contract it checks first.
"""

from __future__ import annotations

import torch

# Beyond this top-k the window is no cheaper than a sort, and vLLM's own path runs.
MAX_WINDOW = 1024


def top_k_top_p(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None, fallback) -> torch.Tensor:
    """Mask `logits` (rows of a batch, updated in place) to each row's top `k`, then to the smallest set of
    those whose probability reaches `p`, as vLLM does; `fallback` (vLLM's function) for what this does not
    cover: no top-k or a top-k over `MAX_WINDOW` in some row, or a tie at a row's k-th logit that reaches past
    the window."""
    if k is None or p is None:
        return fallback(logits, k, p)
    window = int(k.max())
    if window > MAX_WINDOW:
        return fallback(logits, k, p)
    values, indices = logits.topk(window, dim=-1)  # descending
    threshold = values.gather(1, (k.long() - 1).unsqueeze(1))
    if bool(((logits >= threshold).sum(dim=-1) > window).any()):  # vLLM keeps every tie of the k-th logit
        return fallback(logits, k, p)
    ascending = values.flip(-1).masked_fill(values.flip(-1) < threshold, -float("inf"))
    cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
    drop = cumulative <= 1 - p.unsqueeze(dim=1)
    drop[:, -1] = False  # the likeliest token always stays
    kept = ascending.masked_fill(drop, -float("inf")).flip(-1)
    return logits.fill_(-float("inf")).scatter_(1, indices, kept)


class SamplerSpeedup:
    """Mixed into vLLM's worker (`worker_extension_cls`); `install_fast_top_k_top_p` runs in its process."""

    def install_fast_top_k_top_p(self) -> bool:
        """Put `top_k_top_p` in place of vLLM's `apply_top_k_top_p`, which its CPU sampler calls by name; False
        (and vLLM's own left in place) if that function is not the one this was written against."""
        from vllm.v1.sample.ops import topk_topp_sampler

        original = topk_topp_sampler.apply_top_k_top_p
        if getattr(original, "__name__", "") != "apply_top_k_top_p" or not hasattr(topk_topp_sampler,
                                                                                   "apply_top_k_top_p_pytorch"):
            return False

        def fast(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> torch.Tensor:
            return top_k_top_p(logits, k, p, original)

        topk_topp_sampler.apply_top_k_top_p = fast
        return True
