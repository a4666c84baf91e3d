"""`engine.sampler_speedup` against vLLM's own sampler: the same penalised logits, the same tokens kept by
top-k/top-p, each kept token drawn as often as its probability says, and vLLM's own code for the rest."""

from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch
from vllm.v1.sample import sampler as vllm_sampler
from vllm.v1.sample.ops import topk_topp_sampler
from vllm.v1.sample.ops.penalties import apply_all_penalties
from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

from engine.sampler_speedup import (
    SamplerSpeedup,
    _window,
    count_at_least,
    draw,
    greedy_rows_narrowed,
    repetition_penalty,
    top_k_top_p,
)

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


def test_ties_at_the_kth_logit_are_kept_as_vllm_keeps_them():
    # Logits of a bfloat16 model: many share a value, often at the k-th largest.
    generator = torch.Generator().manual_seed(3)
    logits = (torch.randn(8, VOCAB, generator=generator) * 2).to(torch.bfloat16).float()
    k, p = torch.full((8,), 20, dtype=torch.int32), torch.tensor([0.8, 0.9, 0.95, 1.0, 0.5, 0.8, 0.99, 0.7])
    expected = vllm_own(logits.clone(), k, p)
    got = top_k_top_p(logits.clone(), k, p, pytest.fail)
    ties = (logits >= logits.topk(20, dim=-1).values[:, -1:]).sum(dim=-1)
    assert (ties > 20).any()  # the case this test is about
    for row_got, row_expected in zip(got, expected):  # which of the tokens tied at top-p's edge stay is arbitrary
        assert torch.equal(row_got[torch.isfinite(row_got)].sort().values,
                           row_expected[torch.isfinite(row_expected)].sort().values)


def test_what_it_does_not_cover_goes_to_vllm():
    calls = []

    def fallback(logits, k, p):
        calls.append(k)
        return logits

    logits = torch.randn(2, 4096)
    top_k_top_p(logits, None, torch.tensor([0.8, 0.8]), fallback)  # top-p alone
    top_k_top_p(logits, torch.tensor([20, 4096]), torch.tensor([0.8, 0.8]), fallback)  # a row without top-k
    tied = torch.zeros(2, 4096)  # every logit ties with the k-th: more than MAX_WINDOW to keep
    top_k_top_p(tied, torch.tensor([20, 20]), torch.tensor([0.8, 0.8]), fallback)
    assert len(calls) == 3
    assert draw(tied, torch.tensor([20, 20]), torch.tensor([0.8, 0.8])) is None


def test_the_repetition_penalty_gives_vllms_logits_bit_for_bit():
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(4, VOCAB, generator=generator) * 4
    prompts = torch.randint(0, VOCAB, (4, 300), generator=generator)
    prompts[1, 250:] = VOCAB  # a shorter prompt, padded as vLLM pads it
    outputs = [torch.randint(0, VOCAB, (length,), generator=generator).tolist() for length in (0, 5, 120, 40)]
    outputs[2][-1] = -1  # a token not known yet (vLLM's asynchronous scheduling)
    outputs[3] += outputs[3][:10] + prompts[3, :10].tolist()  # repeats
    zeros, penalties = torch.zeros(4), torch.tensor([1.05, 1.3, 1.0, 1.05])
    expected = apply_all_penalties(logits.clone(), prompts, zeros, zeros, penalties, outputs)
    got = repetition_penalty(logits.clone(), prompts, zeros, zeros, penalties, outputs, pytest.fail)
    assert torch.equal(got, expected) and not torch.equal(got, logits)


def test_a_frequency_or_presence_penalty_goes_to_vllm():
    calls = []
    logits, prompts = torch.randn(1, 64), torch.tensor([[1, 2, 3]])
    for presence, frequency in ((0.5, 0.0), (0.0, 0.5)):
        repetition_penalty(logits, prompts, torch.tensor([presence]), torch.tensor([frequency]),
                           torch.tensor([1.05]), [[4]], lambda *arguments: calls.append(arguments))
    assert len(calls) == 2


def test_each_kept_token_is_drawn_as_often_as_its_probability():
    torch.manual_seed(2)  # the draws' noise comes from torch's global generator, as vLLM's does
    logits = torch.randn(1, 4096) * 4
    k, p = torch.tensor([20], dtype=torch.int32), torch.tensor([0.9])
    kept = vllm_own(logits.clone(), k, p)[0]
    probabilities = kept.softmax(dim=-1)
    rows, draws = 1000, 20_000
    tokens = torch.cat([draw(logits.expand(rows, -1).clone(), k.expand(rows), p.expand(rows))
                        for _ in range(draws // rows)])
    assert torch.isfinite(kept[tokens]).all()  # only tokens vLLM keeps
    frequencies = torch.bincount(tokens, minlength=kept.numel()).float() / draws
    likely = probabilities > 0
    assert likely.sum() > 3
    # Within four standard deviations of each token's probability (seeded, so the same draws every run).
    assert ((frequencies[likely] - probabilities[likely]).abs() <=
            4 * (probabilities[likely] * (1 - probabilities[likely]) / draws).sqrt()).all()


@dataclass
class Batch:  # the fields of vLLM's SamplingMetadata that `greedy_rows_narrowed` reads
    temperature: torch.Tensor | None
    all_greedy: bool
    all_random: bool
    top_k: torch.Tensor | None


def test_greedy_rows_beside_sampled_ones_draw_from_one_token():
    vocabulary = torch.tensor([VOCAB, 20, VOCAB, 40], dtype=torch.int32)  # vLLM gives a greedy row the vocabulary
    mixed = Batch(torch.tensor([0.0, 0.7, 0.0, 1.2]), False, False, vocabulary)
    assert greedy_rows_narrowed(mixed).top_k.tolist() == [1, 20, 1, 40]
    assert mixed.top_k is vocabulary  # a copy: vLLM's own batch is not changed
    for unchanged in (Batch(torch.tensor([0.7, 1.2]), False, True, vocabulary[[1, 3]]),  # all sampled
                      Batch(torch.tensor([0.0, 0.7]), False, False, None)):  # no top-k: vLLM's path anyway
        assert greedy_rows_narrowed(unchanged) is unchanged
    # Within the 1024 a window covers: the fast draw runs for the sampled rows instead of vLLM's sort.
    assert _window(torch.randn(4, VOCAB), greedy_rows_narrowed(mixed).top_k, torch.full((4,), 0.8)) is not None
    assert _window(torch.randn(4, VOCAB), vocabulary, torch.full((4,), 0.8)) is None


def test_installed_in_place_of_vllms_sampler_once():
    worker = SimpleNamespace(model_runner=SimpleNamespace(sampler=vllm_sampler.Sampler()))
    penalties, masking = vllm_sampler.apply_all_penalties, topk_topp_sampler.apply_top_k_top_p
    ranks = vllm_sampler.batched_count_greater_than
    try:
        assert SamplerSpeedup.install_sampler_speedup(worker)
        assert vllm_sampler.apply_all_penalties is not penalties
        assert topk_topp_sampler.apply_top_k_top_p is not masking
        assert vllm_sampler.batched_count_greater_than is count_at_least  # not compiled on a first teaching reply
        installed = (vllm_sampler.apply_all_penalties, topk_topp_sampler.apply_top_k_top_p,
                     worker.model_runner.sampler.topk_topp_sampler.forward)
        assert installed[2].__name__ == "fast_sample"
        assert worker.model_runner.sampler.sample.__name__ == "narrowed_sample"
        assert SamplerSpeedup.install_sampler_speedup(worker)  # in place already: not stacked on itself
        assert (vllm_sampler.apply_all_penalties, topk_topp_sampler.apply_top_k_top_p,
                worker.model_runner.sampler.topk_topp_sampler.forward) == installed
    finally:
        vllm_sampler.apply_all_penalties, topk_topp_sampler.apply_top_k_top_p = penalties, masking
        vllm_sampler.batched_count_greater_than = ranks


def test_vllms_own_sampler_stays_where_it_is_not_the_one_this_was_written_for():
    worker = SimpleNamespace(model_runner=SimpleNamespace(sampler=vllm_sampler.Sampler()))
    worker.model_runner.sampler.topk_topp_sampler.forward = worker.model_runner.sampler.topk_topp_sampler.forward_native
    penalties = vllm_sampler.apply_all_penalties
    assert not SamplerSpeedup.install_sampler_speedup(worker)
    assert vllm_sampler.apply_all_penalties is penalties
