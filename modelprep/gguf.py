"""Turn a GGUF file of a Qwen model into a Hugging Face folder that vLLM and transformers load.

vLLM 0.30 on CPU cannot load GGUF itself. transformers reads the GGUF's config and dequantises every
tensor (to bfloat16 here); the tokenizer is rebuilt as transformers' own `Qwen2Tokenizer` from the
vocabulary, merges and special tokens stored in the file, so it has Qwen2's normaliser and
pre-tokenizer split exactly. Writes into a given folder; knows nothing of caches or of where the file
came from.
"""

from __future__ import annotations

from pathlib import Path

import torch
from gguf import GGUFReader, TokenType
from safetensors.torch import save_file
from tokenizers import AddedToken
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig
from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer

from config.errors import ModelLoadError

# Architectures whose GGUF transformers dequantises and whose tokenizer is Qwen2's byte-level BPE.
SUPPORTED_ARCHITECTURES = ("qwen2", "qwen3")
DTYPE = torch.bfloat16


def convert_gguf(gguf_path: Path, out: Path) -> None:
    """Write config, bfloat16 safetensors, generation config and tokenizer of `gguf_path` into `out`."""
    reader = GGUFReader(gguf_path)
    architecture = _field(reader, "general.architecture")
    tokenizer_kind = (_field(reader, "tokenizer.ggml.model"), _field(reader, "tokenizer.ggml.pre", ""))
    if architecture not in SUPPORTED_ARCHITECTURES or tokenizer_kind != ("gpt2", "qwen2"):
        raise ModelLoadError(
            f"{gguf_path.name} holds a {architecture!r} model with a {tokenizer_kind[1] or tokenizer_kind[0]!r} "
            f"tokenizer; this app converts GGUF files of {' and '.join(SUPPORTED_ARCHITECTURES)} (Qwen) models "
            "only. Use the model's Hugging Face folder instead."
        )
    config = AutoConfig.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config)
    tensors = load_gguf_checkpoint(gguf_path, return_tensors=True, model_to_load=skeleton, torch_dtype=DTYPE)["tensors"]
    if "lm_head.weight" not in tensors:  # GGUF files of tied models store the embedding only
        config.tie_word_embeddings = True
    missing = set(skeleton.state_dict()) - set(tensors) - ({"lm_head.weight"} if config.tie_word_embeddings else set())
    if missing:
        raise ModelLoadError(f"{gguf_path.name} lacks tensors {sorted(missing)[:5]}; the file is incomplete.")
    config.dtype = DTYPE
    config.architectures = [type(skeleton).__name__]  # vLLM picks its model class by this name
    config.save_pretrained(out)
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})

    tokenizer = qwen2_tokenizer(reader)
    tokenizer.save_pretrained(out)
    GenerationConfig(bos_token_id=config.bos_token_id, pad_token_id=tokenizer.pad_token_id,
                     eos_token_id=tokenizer.eos_token_id).save_pretrained(out)


def qwen2_tokenizer(reader: GGUFReader) -> Qwen2Tokenizer:
    """Qwen2's tokenizer from the vocabulary, merges, special tokens and chat template in a GGUF file.

    Normal tokens and the special ones keep the ids the file gives them; the `[PAD…]` filler entries
    that pad the GGUF vocabulary to the embedding size are not tokens of Qwen2 and are left out.
    """
    tokens = _field(reader, "tokenizer.ggml.tokens")
    kinds = _field(reader, "tokenizer.ggml.token_type")
    added = [AddedToken(token, special=kind == TokenType.CONTROL, normalized=False)
             for token, kind in zip(tokens, kinds) if kind in (TokenType.CONTROL, TokenType.USER_DEFINED)]
    vocab = {token: index for index, (token, kind) in enumerate(zip(tokens, kinds))
             if kind in (TokenType.NORMAL, TokenType.CONTROL, TokenType.USER_DEFINED)}
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=[tuple(merge.split(" ", 1)) for merge in _field(reader, "tokenizer.ggml.merges")],
        unk_token=None,
        bos_token=None,
        eos_token=tokens[_field(reader, "tokenizer.ggml.eos_token_id")],
        pad_token=tokens[_field(reader, "tokenizer.ggml.padding_token_id")],
        model_max_length=_field(reader, f"{_field(reader, 'general.architecture')}.context_length"),
        chat_template=_field(reader, "tokenizer.chat_template"),
        clean_up_tokenization_spaces=False,
    )
    tokenizer.add_tokens(added)
    moved = [token.content for token in added if tokenizer.convert_tokens_to_ids(token.content) != vocab[token.content]]
    if moved:
        raise ModelLoadError(f"The GGUF tokenizer's special tokens {moved[:3]} did not keep their ids.")
    return tokenizer


_MISSING = object()


def _field(reader: GGUFReader, key: str, default: object = _MISSING):
    field = reader.get_field(key)
    if field is None:
        if default is _MISSING:
            raise ModelLoadError(f"The GGUF file lacks {key}; it is not a complete model file.")
        return default
    return field.contents()
