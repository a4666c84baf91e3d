"""What a token stands for in the teaching view's token view: whole characters, a leading space, a character
split over bytes, special tokens (`engine.tokens`), on the tiny model's byte-level BPE tokenizer."""

import pytest
from transformers import AutoTokenizer

from engine.tokens import pieces

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_each_token_shows_its_text_or_its_bytes(tokenizer):
    text = "<|im_start|>欢迎来到广州 tower 龘"  # 龘 is not in the tiny vocabulary: three byte tokens
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert pieces(tokenizer, ids) == ["<|im_start|>", "欢迎来到广州", " t", "ow", "er", " ", "\\xe9", "\\xbe", "\\x98"]
