"""`engine.sampler_speedup.top_k_top_p` keeps exactly the tokens, and logits, vLLM's own top-k/top-p keeps."""

import pytest
import torch
from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

from engine.sampler_speedup import SamplerSpeedup, top_k_top_p

pytestmark = pytest.mark.fast
VOCAB = 151_936


def vllm_own(logits, k, p):
    return apply_top_k_top_p_pytorch(logits, k, p, allow_cpu_sync=True)


@pytest.mark.parametrize("top_k, top_p", [([20] * 8, [0.8] * 8), ([1, 2, 5, 20, 50, 20, 40, 1024], [0.8, 0.5, 0.95, 1.0, 0.1,
                                          0.99, 0.8, 0.9])])
def test_the_same_tokens_and_logits_as_vllm(top_k, top_p):
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(len(top_k), VOCAB, generator=generator) * 4
    k, p = torch.tensor(top_k, dtype=torch.int32), torch.tensor(top_p)
    expected = vllm_own(logits.clone(), k, p)
    got = top_k_top_p(logits.clone(), k, p, vllm_own)
    assert torch.equal(torch.isfinite(got), torch.isfinite(expected))
    assert torch.equal(got[torch.isfinite(got)], expected[torch.isfinite(expected)])
    assert all(int(torch.isfinite(row).sum()) <= kept for row, kept in zip(got, top_k))


def test_what_it_does_not_cover_goes_to_vllm():
    calls = []

    def fallback(logits, k, p):
        calls.append(k)
        return logits

    logits = torch.randn(2, 4096)
    top_k_top_p(logits, None, torch.tensor([0.8, 0.8]), fallback)  # top-p alone
    top_k_top_p(logits, torch.tensor([20, 4096]), torch.tensor([0.8, 0.8]), fallback)  # a row without top-k
    tied = torch.zeros(2, 4096)  # every logit ties with the k-th
    top_k_top_p(tied, torch.tensor([20, 20]), torch.tensor([0.8, 0.8]), fallback)
    assert len(calls) == 3


def test_installed_in_place_of_vllms_function_once():
    from vllm.v1.sample.ops import topk_topp_sampler

    original = topk_topp_sampler.apply_top_k_top_p
    try:
        assert SamplerSpeedup().install_fast_top_k_top_p()
        assert topk_topp_sampler.apply_top_k_top_p is not original
        assert not SamplerSpeedup().install_fast_top_k_top_p()  # not stacked on itself
    finally:
        topk_topp_sampler.apply_top_k_top_p = original
