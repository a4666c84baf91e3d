"""Build tiny model folders, in Hugging Face format, for tests: a random Qwen2 model, and a Qwen3 one that thinks.

The model is real as far as vLLM and transformers are concerned (Qwen2 architecture, a byte-level BPE
tokenizer with Qwen2's pre-tokenizer split and special tokens, a ChatML chat template), but small enough
to load in seconds on two cores. Its weights are random with a fixed seed, so its text is gibberish and
greedy output is deterministic and never ends before its token budget. vLLM's CPU attention needs head_dim 64, hence hidden 128 with 2 heads.

The thinker (`build_tiny_thinker`) is a Qwen3 model with Qwen3's thinking template whose weights are set, not
trained, so that greedy decoding after the generation prompt writes `<think>`, a fixed thinking text, `</think>`,
a fixed answer and `<|im_end|>`: its layers add nothing to the residual stream, so each next token depends on
the last one only, and its output head maps each token of that script to the next.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]

# Qwen2's pre-tokenizer regex (from its tokenizer.json).
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen2.5-Instruct's template, without the tool-calling branches.
QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (message.role == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Qwen3's switch: with thinking off, the generation prompt carries an empty think block.
QWEN3_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}{%- endif %}"
)

CORPUS = [
    "Welcome to Guangzhou, the city of flowers. The Canton Tower stands by the Pearl River.",
    "欢迎来到广州，花城的早茶很有名：虾饺、烧卖、叉烧包和肠粉都值得一试。",
    "陈家祠、沙面岛、越秀公园和白云山是广州的著名景点，适合一家人一起游玩。",
    "The quick brown fox jumps over the lazy dog. 1234567890 tokens per second.",
    "你好！我是你的导游，今天我们一起去看看珠江夜景吧。请问你想吃什么？",
    "A helpful assistant answers questions clearly, briefly and honestly.",
]


def _train_tokenizer(vocab_size: int, first_tokens: list[str]) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=first_tokens + SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS * 20, trainer=trainer)
    return tokenizer


MARKDOWN_SYNTAX = set("`*_~#|>[]$\\<{}^=-+")


def _non_prose_ids(tokenizer: Tokenizer) -> list[int]:
    """Tokens a real model's prose rarely holds: partial UTF-8, control characters, markdown syntax.

    Random markdown syntax (unbalanced fences, tables, strike-through) makes the browser's markdown
    renderer so slow on two cores that a page stalls for seconds; a real model writes well-formed text.
    """
    excluded = []
    for token_id in range(tokenizer.get_vocab_size()):
        text = tokenizer.decode([token_id], skip_special_tokens=False)
        if ("\ufffd" in text or MARKDOWN_SYNTAX & set(text)
                or any(unicodedata.category(char) == "Cc" and char != "\n" for char in text)):
            excluded.append(token_id)
    return excluded


def build_tiny_qwen(folder: Path, *, thinking_template: bool = False, seed: int = 0,
                    hidden_size: int = 128, num_layers: int = 2, echo: str | None = None,
                    initializer_range: float = 0.2) -> Path:
    """Write a tiny Qwen2 model (config, safetensors, tokenizer, chat template) into `folder`.

    The defaults stream hundreds of tokens a second; a larger `hidden_size` and `num_layers` give
    a model that streams at a real CPU model's pace, for tests of what a browser shows. A small
    `initializer_range` gives a model that mostly repeats the token before (a reply it copies from).
    """
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tokenizer(vocab_size=1024, first_tokens=[echo] if echo else [])
    if echo:  # token 0, plain text rather than a special token, so it shows in the reply
        tokenizer.add_tokens([AddedToken(echo, special=False, normalized=False)])
    tokenizer.save(str(folder / "tokenizer.json"))
    ids = {token: tokenizer.token_to_id(token) for token in SPECIAL_TOKENS}
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 16384,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "bos_token": None,
        "unk_token": None,
        "chat_template": QWEN3_TEMPLATE if thinking_template else QWEN25_TEMPLATE,
        "added_tokens_decoder": {
            str(ids[token]): {"content": token, "special": True, "lstrip": False, "rstrip": False,
                              "normalized": False, "single_word": False}
            for token in SPECIAL_TOKENS
        },
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, ensure_ascii=False, indent=2))
    eos = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    (folder / "generation_config.json").write_text(
        json.dumps({"eos_token_id": eos, "pad_token_id": ids["<|endoftext|>"]})
    )

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=hidden_size // 64,
        # Qwen's own ratio of query heads to KV heads (6 or 7): vLLM's CPU attention on AMX refuses more than 16 per
        # KV head at decode ("split_kv_q_token_num_threshold * q_head_per_kv <= 16"), which 24 heads on one broke.
        num_key_value_heads=max(1, hidden_size // 64 // 6),
        max_position_embeddings=16384,
        tie_word_embeddings=True,
        initializer_range=initializer_range,  # the default 0.02 makes greedy output one repeated token
        eos_token_id=eos[0],
        bos_token_id=ids["<|endoftext|>"],
        torch_dtype="bfloat16",
    )
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():
        # A zero row gives a zero logit, which greedy decoding never picks over the random positive
        # ones: greedy replies then run to their token budget (so a test can stop one mid-stream) and
        # hold only plain prose, as a real model's mostly do.
        model.get_input_embeddings().weight[eos + _non_prose_ids(tokenizer)] = 0
        if echo:
            model.model.norm.weight.zero_()  # every logit 0: greedy decoding takes the first token, `echo`
    model.save_pretrained(folder)
    return folder


def build_tiny_thinker(folder: Path, thinking_tokens: int = 24, answer_tokens: int = 16) -> Path:
    """Write the thinking Qwen3 model into `folder`, and `script.json`: the thinking and the answer it writes."""
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tokenizer(vocab_size=1024, first_tokens=[])
    tokenizer.save(str(folder / "tokenizer.json"))
    ids = {token: tokenizer.token_to_id(token) for token in SPECIAL_TOKENS}
    thinking = ("<think>", "</think>")  # plain text in Qwen3's tokenizer, as here: not skipped when decoding
    saved = json.loads((folder / "tokenizer.json").read_text())
    for added in saved["added_tokens"]:
        added["special"] = added["content"] not in thinking
    (folder / "tokenizer.json").write_text(json.dumps(saved, ensure_ascii=False))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 16384, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "bos_token": None, "unk_token": None, "chat_template": QWEN3_TEMPLATE,
        "added_tokens_decoder": {str(ids[token]): {"content": token, "special": token not in thinking, "lstrip": False,
                                                   "rstrip": False, "normalized": False, "single_word": False}
                                 for token in SPECIAL_TOKENS}}, ensure_ascii=False, indent=2))
    eos = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": eos, "pad_token_id": eos[1]}))

    # The script: after the generation prompt's last token, "\n", come <think>, distinct prose tokens, </think>,
    # more of them, and the end of the turn. Each token appears once, so "the next token" is a function of it.
    newline = tokenizer.encode("\n").ids[0]
    prose = [token for token in reversed(range(len(SPECIAL_TOKENS), tokenizer.get_vocab_size()))  # merges first
             if token not in set(_non_prose_ids(tokenizer)) | set(ids.values()) | {newline}
             and tokenizer.decode([token]).strip() and "\n" not in tokenizer.decode([token])]
    thought, answer = prose[:thinking_tokens], prose[thinking_tokens:thinking_tokens + answer_tokens]
    script = [newline, ids["<think>"], *thought, ids["</think>"], *answer, ids["<|im_end|>"]]
    (folder / "script.json").write_text(json.dumps({"thinking": tokenizer.decode(thought), "answer":
                                                    tokenizer.decode(answer)}, ensure_ascii=False))

    hidden = 128
    config = Qwen3Config(vocab_size=tokenizer.get_vocab_size(), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=2, num_attention_heads=hidden // 64, num_key_value_heads=1, head_dim=64,
                         max_position_embeddings=16384, tie_word_embeddings=False, eos_token_id=eos[0],
                         bos_token_id=eos[1], torch_dtype="bfloat16")
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        embeddings = torch.nn.functional.normalize(torch.randn(config.vocab_size, hidden), dim=1)
        model.get_input_embeddings().weight.copy_(embeddings)
        for layer in model.model.layers:  # nothing added to the residual stream: it stays the token's embedding
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        head = torch.zeros(config.vocab_size, hidden)
        for token, following in zip(script, script[1:]):
            head[following] = 8 * embeddings[token]  # the next token's logit is far above every other's
        model.lm_head.weight.copy_(head)
    model.to(torch.bfloat16).save_pretrained(folder)
    return folder


if __name__ == "__main__":
    import sys

    print(build_tiny_qwen(Path(sys.argv[1])))
