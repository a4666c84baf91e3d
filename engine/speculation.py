"""Speculative decoding by prompt lookup (n-gram): the engine's options for it, and the CPU kernels vLLM's
rejection sampler needs in this build.

A tour guide's reply copies much of what it says from the passages in its prompt. vLLM's n-gram proposer looks
the reply's last few tokens up in the prompt (and the reply so far) and proposes the tokens that followed them
there; one forward pass then checks all of them, so one read of the weights can yield several tokens. Checking
is vLLM's rejection sampler: at temperature 0 a proposed token is kept while it is the model's argmax, and above
0 a proposal with no probabilities of its own (n-gram) is kept with the model's probability of it, otherwise the
model's token is drawn from what remains (Leviathan et al. 2023), so every reply is drawn from the model's own
distribution. The figures: `python -m bench.studies.speculation_speed`, docs/performance.md.

vLLM 0.30's CPU build swaps the rejection sampler's Triton kernels for C++ ones (`cpu_model_runner.
_postprocess_triton`), but the dispatchers that launch them kept the Triton kernels they wrapped at import, and the
first step that checks proposals fails ("Cannot inspect kernel parameters"). `RejectionKernels.
install_rejection_kernels` points those dispatchers at the C++ kernels in the engine's process; the expansion of
per-chat values to per-token ones, whose C++ kernel writes integers into a copy (temperatures are floats), is done
with torch instead.
"""

from __future__ import annotations

import torch

from config.settings import Settings

LOOKUP_MIN, LOOKUP_MAX = 2, 4  # the shortest and longest run of a reply's last tokens looked up in its prompt


def speculative_config(settings: Settings) -> dict | None:
    """vLLM's `speculative_config` for the settings; None with speculation off."""
    if settings.speculation == "off":
        return None
    options = {"method": "ngram", "num_speculative_tokens": settings.speculative_tokens,
               "prompt_lookup_min": LOOKUP_MIN, "prompt_lookup_max": LOOKUP_MAX}
    most, chats = settings.speculation_max_chats, settings.max_concurrent_replies
    if most < chats:  # vLLM's schedule by batch size: (fewest, most, tokens proposed), none above `most`
        options["num_speculative_tokens_per_batch_size"] = [(1, most, settings.speculative_tokens), (most + 1, chats, 0)]
    return options


def expand(output: torch.Tensor, input_ptr: torch.Tensor, cu_num_tokens_ptr: torch.Tensor, replace_from: float,
           replace_to: float, MAX_NUM_TOKENS: int | None = None) -> None:  # noqa: N803 (the kernel's own names)
    """vLLM's `expand_kernel`: each chat's value (`input_ptr`, `replace_from` read as `replace_to`) written once for
    each of its tokens (`cu_num_tokens_ptr` counts them cumulatively) into `output`."""
    counts = torch.diff(cu_num_tokens_ptr, prepend=cu_num_tokens_ptr.new_zeros(1))
    values = torch.where(input_ptr == replace_from, torch.as_tensor(replace_to, dtype=input_ptr.dtype), input_ptr)
    output[:int(cu_num_tokens_ptr[-1])] = values.repeat_interleave(counts)


class RejectionKernels:
    """Mixed into vLLM's worker (`worker_extension_cls`); `install_rejection_kernels` runs in its process."""

    def install_rejection_kernels(self) -> bool:
        """The C++ kernels (and `expand`) behind the rejection sampler's dispatchers; False where the dispatchers
        are not the ones this was written against (vLLM's own then run)."""
        from vllm.utils import cpu_triton_utils as cpu
        from vllm.v1.sample import rejection_sampler as sampler

        kernels = {"_rejection_greedy_sample": cpu.rejection_greedy_sample_kernel,
                   "_rejection_random_sample": cpu.rejection_random_sample_kernel,
                   "_sample_recovered_tokens": cpu.sample_recovered_tokens_kernel,
                   "_expand": cpu._FuncWrapper(expand)}
        dispatchers = {name: getattr(sampler, name, None) for name in kernels}
        if not all(hasattr(dispatcher, "kernel") for dispatcher in dispatchers.values()):
            return False
        for name, kernel in kernels.items():
            dispatchers[name].kernel = kernel
        return True
