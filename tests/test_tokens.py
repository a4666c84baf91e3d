"""The teaching view's tokens: what a token stands for (whole characters, a leading space, a character split over
bytes, special tokens: `engine.token_text`, on the tiny model's byte-level BPE tokenizer), and the model's
probabilities reshaped by the sampling (`engine.distribution`)."""

import math

import pytest
import torch
from transformers import AutoTokenizer
from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

from engine.api import Sampling
from engine.distribution import ALTERNATIVES, exact, reshape
from engine.token_text import piece, pieces

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_each_token_shows_its_text_or_its_bytes(tokenizer):
    text = "<|im_start|>欢迎来到广州 tower 龘"  # 龘 is not in the tiny vocabulary: three byte tokens
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert pieces(tokenizer, ids) == ["<|im_start|>", "欢迎来到广州", " t", "ow", "er", " ", "\\xe9", "\\xbe", "\\x98"]
    assert piece("Ġé") == " \\xe9"  # a space and the first byte of 龘 in one token (Qwen's): the space stays text


LOGPROBS = [math.log(p) for p in (0.5, 0.2, 0.15, 0.1, 0.05)]


def test_the_sampling_reshapes_the_models_probabilities_as_vllms_sampler_does():
    same = reshape(LOGPROBS, Sampling(1.0, 1.0, 16))
    assert same == pytest.approx([0.5, 0.2, 0.15, 0.1, 0.05])
    hot, cold = reshape(LOGPROBS, Sampling(2.0, 1.0, 16)), reshape(LOGPROBS, Sampling(0.5, 1.0, 16))
    assert hot[0] < 0.5 < cold[0] and hot[-1] > 0.05 > cold[-1]  # temperature flattens or sharpens
    assert cold == pytest.approx([p * p / 0.325 for p in (0.5, 0.2, 0.15, 0.1, 0.05)])  # p^2, renormalised
    assert reshape(LOGPROBS, Sampling(1.0, 1.0, 16, top_k=2)) == pytest.approx([5 / 7, 2 / 7, 0, 0, 0])
    # top-p: the smallest set whose probability reaches it (0.5 + 0.2 = 0.7 < 0.75, then 0.85)
    assert reshape(LOGPROBS, Sampling(1.0, 0.75, 16)) == pytest.approx([0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0])
    assert reshape(LOGPROBS, Sampling(1.0, 0.1, 16)) == pytest.approx([1.0, 0, 0, 0, 0])  # at least one


def test_the_view_says_when_its_reshaped_probabilities_are_exact():
    distinct = [-0.1 * rank for rank in range(ALTERNATIVES)]
    assert exact(distinct, Sampling(0.7, 0.8, 16, top_k=20, repetition_penalty=1.0))  # the 21st is seen below
    assert exact(distinct, Sampling(0.0, 0.8, 16, top_k=0, repetition_penalty=1.05))  # greedy takes the likeliest
    assert not exact(distinct, Sampling(0.7, 0.8, 16, top_k=0))  # the tokens past those returned are unknown
    assert not exact(distinct, Sampling(0.7, 0.8, 16, top_k=20, repetition_penalty=1.05))
    assert not exact(distinct, Sampling(0.7, 0.8, 16, top_k=ALTERNATIVES))
    tied_to_the_end = distinct[:19] + [-2.0, -2.0]  # the 20th tied with the 21st, and maybe with more unseen
    assert not exact(tied_to_the_end, Sampling(0.7, 0.8, 16, top_k=20))
    assert exact(tied_to_the_end, Sampling(0.7, 0.8, 16, top_k=19))


def test_ties_at_the_kth_token_are_kept_as_vllms_sampler_keeps_them():
    """The reshaped probabilities against vLLM's own temperature, top-k and top-p on 16-bit logits with ties
    (frequent in bfloat16): where the view says exact, they are the sampler's, tie group and all."""
    generator = torch.Generator().manual_seed(5)
    logits = (torch.randn(6, 151_936, generator=generator) * 2).to(torch.bfloat16).float()
    top = logits.topk(30, dim=-1)
    logits[0, top.indices[0, 4:7]] = top.values[0, 4]  # the 5th to 7th tied: top-k 5 keeps all three
    logits[1, top.indices[1, 19:25]] = top.values[1, 19]  # the 20th tied past the 21st: not exact at top-k 20
    logits[2, top.indices[2, 1:3]] = top.values[2, 1]  # a tie inside the nucleus
    seen = {True: 0, False: 0}
    for row, (temperature, top_k, top_p) in enumerate([(1.0, 5, 1.0), (0.7, 20, 0.95), (0.7, 20, 0.8), (1.3, 20, 0.9),
                                                       (0.5, 3, 1.0), (1.0, 10, 0.7)]):
        sampling = Sampling(temperature, top_p, 16, top_k=top_k)
        vllm = apply_top_k_top_p_pytorch(logits[row:row + 1] / temperature, torch.tensor([top_k]),
                                         torch.tensor([top_p]), allow_cpu_sync=True).softmax(dim=-1)[0]
        returned = logits[row].log_softmax(dim=-1).topk(ALTERNATIVES)  # as vLLM returns them
        reshaped = reshape(returned.values.tolist(), sampling)
        seen[exact(returned.values.tolist(), sampling)] += 1
        if exact(returned.values.tolist(), sampling):
            assert reshaped == pytest.approx(vllm[returned.indices].tolist(), abs=1e-6)
            assert float(vllm[returned.indices].sum()) == pytest.approx(1.0)
        if row == 0:
            assert sum(share > 0 for share in reshaped) == 7
    assert seen == {True: 5, False: 1}
