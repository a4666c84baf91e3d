"""Write a GGUF file of a Hugging Face model folder (the tests' tiny Qwen2), for the conversion tests.

What llama.cpp's converter would write for a Qwen2 model, in small: the architecture's hyper-parameters,
Qwen2's tokenizer as GGUF lists (tokens, types, merges, special ids, chat template) and every tensor
under its GGUF name, matrices quantised to Q8_0 so that dequantisation is exercised.
"""

from __future__ import annotations

import json
from pathlib import Path

import gguf
from safetensors.torch import load_file
from transformers import AutoConfig, AutoTokenizer


def write_gguf(model_dir: Path, path: Path, architecture: str = "qwen2") -> Path:
    config = AutoConfig.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    writer = gguf.GGUFWriter(path, architecture)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    tokens = [token for token, _ in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])]
    special = set(tokenizer.all_special_tokens) | {token.content for token in tokenizer.added_tokens_decoder.values()}
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if token in special else gguf.TokenType.NORMAL for token in tokens])
    merges = json.loads((model_dir / "tokenizer.json").read_text())["model"]["merges"]
    writer.add_token_merges([merge if isinstance(merge, str) else " ".join(merge) for merge in merges])
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_pad_token_id(tokenizer.pad_token_id)
    writer.add_bos_token_id(config.bos_token_id)
    writer.add_add_bos_token(False)
    writer.add_chat_template(tokenizer.chat_template)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, config.num_hidden_layers)
    for name, tensor in load_file(model_dir / "model.safetensors").items():
        base, suffix = name.rsplit(".", 1)
        data = tensor.float().numpy()
        gguf_name = f"{names.get_name(base)}.{suffix}"
        if data.ndim == 2:
            writer.add_tensor(gguf_name, gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0),
                              raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(gguf_name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
