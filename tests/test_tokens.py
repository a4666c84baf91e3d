"""The teaching view's tokens: what a token stands for (whole characters, a leading space, a character split over
bytes, special tokens: `engine.token_text`, on the tiny model's byte-level BPE tokenizer), and the model's
probabilities reshaped by the sampling (`engine.distribution`)."""

import math

import pytest
from transformers import AutoTokenizer

from engine.api import Sampling
from engine.token_text import pieces
from engine.distribution import exact, reshape

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_each_token_shows_its_text_or_its_bytes(tokenizer):
    text = "<|im_start|>欢迎来到广州 tower 龘"  # 龘 is not in the tiny vocabulary: three byte tokens
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert pieces(tokenizer, ids) == ["<|im_start|>", "欢迎来到广州", " t", "ow", "er", " ", "\\xe9", "\\xbe", "\\x98"]


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
    assert exact(Sampling(0.7, 0.8, 16, top_k=20, repetition_penalty=1.0))
    assert exact(Sampling(0.0, 0.8, 16, top_k=0, repetition_penalty=1.05))  # greedy takes the likeliest
    assert not exact(Sampling(0.7, 0.8, 16, top_k=0))  # the tokens past the 20 returned are unknown
    assert not exact(Sampling(0.7, 0.8, 16, top_k=20, repetition_penalty=1.05))
