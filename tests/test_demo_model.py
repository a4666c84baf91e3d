"""The converted demo model's tokenizer is Qwen2's, checked against independent sources.

References: `qwen.tiktoken` from Alibaba's `dashscope` package (the 151,643 byte-level BPE ranks of
Qwen's tokenizer, read as a data file, never imported) encoded by `tiktoken` with Qwen's published
pre-tokenizer pattern and NFC normalisation; and the chat template carried in the GGUF file itself,
rendered with plain Jinja. The demo model is prepared by ./test.sh's set-up.
"""

import base64
import importlib.metadata
import json
import unicodedata

import jinja2
import pytest
import tiktoken
from gguf import GGUFReader
from transformers import AutoTokenizer
from transformers.convert_slow_tokenizer import bytes_to_unicode

from modelprep.demo import DEMOS

QWEN_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN_SPECIAL = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
TEXTS = [
    "推荐三个广州的景点，再说说早茶：虾饺、烧卖、肠粉！",
    "Hello, world! I'm sure we'll visit THE Canton Tower at 8:30pm — it's 600 m tall.",
    "数字 1234567890、3.14159 和 ２０２６年；emoji 🙂👍🏽🇨🇳 and ＡＢＣ full-width.",
    "  leading spaces,\ttabs,\n\n\nnewlines   and trailing   ",
    "e\u0301 café naïve Ünïcödé 한국어 日本語のテキスト Ελληνικά русский عربى",
    "def f(x):\n    return x ** 2  # code\n<|im_start|>user\n你好<|im_end|>\n",
]


@pytest.fixture(scope="module")
def tokenizer(demo_model_dir):
    return AutoTokenizer.from_pretrained(demo_model_dir)


@pytest.fixture(scope="module")
def reference() -> tiktoken.Encoding:
    ranks_file = importlib.metadata.distribution("dashscope").locate_file("dashscope/resources/qwen.tiktoken")
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in open(ranks_file))}
    return tiktoken.Encoding("qwen", pat_str=QWEN_PATTERN, mergeable_ranks=ranks, special_tokens=QWEN_SPECIAL)


@pytest.fixture(scope="module")
def gguf_reader(demo_model_dir):
    return GGUFReader(demo_model_dir.parent / f"{DEMOS['demo-0.5b'].name}.gguf")


def test_vocabulary_and_merges_are_qwen2s(tokenizer, reference, demo_model_dir):
    to_unicode = bytes_to_unicode()
    expected = {"".join(to_unicode[byte] for byte in token): rank
                for token, rank in reference._mergeable_ranks.items()}
    vocabulary = tokenizer.get_vocab()
    assert {token: index for token, index in vocabulary.items() if index < 151643} == expected
    merges = json.loads((demo_model_dir / "tokenizer.json").read_text())["model"]["merges"]
    assert len(merges) == len(expected) - 256  # every token but the 256 single bytes comes from one merge


def test_special_tokens_keep_their_ids(tokenizer, gguf_reader):
    for token, index in QWEN_SPECIAL.items():
        assert tokenizer.convert_tokens_to_ids(token) == index
    gguf_tokens = gguf_reader.get_field("tokenizer.ggml.tokens").contents()
    for index, token in tokenizer.added_tokens_decoder.items():
        assert gguf_tokens[index] == token.content
    assert len(tokenizer) == 151643 + 22  # the vocabulary plus Qwen2.5's 22 added tokens, no padding entries
    assert (tokenizer.eos_token, tokenizer.pad_token, tokenizer.bos_token) == ("<|im_end|>", "<|endoftext|>", None)


@pytest.mark.parametrize("text", TEXTS)
def test_encodings_match_the_reference(tokenizer, reference, text):
    expected = reference.encode(unicodedata.normalize("NFC", text), allowed_special="all")
    assert tokenizer.encode(text) == expected
    assert tokenizer.decode(expected) == unicodedata.normalize("NFC", text)


def test_chatml_matches_the_template_carried_in_the_gguf(tokenizer, gguf_reader):
    conversation = [
        {"role": "system", "content": "你是一位热情的广州导游。"},
        {"role": "user", "content": "推荐三个广州的景点"},
        {"role": "assistant", "content": "1. 陈家祠\n2. 沙面\n3. 广州塔"},
        {"role": "user", "content": "What should I eat for dim sum?"},
    ]
    rendered = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    template = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(
        gguf_reader.get_field("tokenizer.chat_template").contents())
    assert rendered == template.render(messages=conversation, add_generation_prompt=True)
    assert rendered == (
        "<|im_start|>system\n你是一位热情的广州导游。<|im_end|>\n"
        "<|im_start|>user\n推荐三个广州的景点<|im_end|>\n"
        "<|im_start|>assistant\n1. 陈家祠\n2. 沙面\n3. 广州塔<|im_end|>\n"
        "<|im_start|>user\nWhat should I eat for dim sum?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = tokenizer.apply_chat_template(conversation, add_generation_prompt=True, return_dict=False)
    assert ids[:3] == [151644, 8948, 198] and ids[-3:] == [151644, 77091, 198]
