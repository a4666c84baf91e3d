"""Memory needed per model, computed from configurations: the table in docs/deployment.md and the pre-start check."""

import json

import pytest

from config.errors import ModelLoadError
from config.settings import Settings
from modelprep.preflight import check_model
from modelprep.sizing import (
    GIB,
    KV_BLOCK_TOKENS,
    QWEN,
    RUNTIME_BYTES,
    ModelShape,
    kv_cache_budget,
    kv_cache_bytes,
    memory_needed,
    memory_table,
    weight_bytes,
)

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("name, published_billions", [
    ("Qwen2.5-0.5B-Instruct", 0.49), ("Qwen2.5-1.5B-Instruct", 1.54), ("Qwen2.5-7B-Instruct", 7.61),
    ("Qwen2.5-14B-Instruct", 14.77),
])
def test_parameter_counts_match_the_published_sizes(name, published_billions):
    assert QWEN[name].parameters() / 1e9 == pytest.approx(published_billions, abs=0.01)


def test_kv_cache_per_token_is_two_by_layers_kv_heads_head_dim_bytes():
    seven_b = QWEN["Qwen2.5-7B-Instruct"]
    assert kv_cache_bytes(seven_b, 1) == 2 * 28 * 4 * 128 * 2
    assert kv_cache_bytes(seven_b, 4096, "float32") == 2 * kv_cache_bytes(seven_b, 4096)


def test_int8_keeps_embeddings_in_16_bits_and_the_head_too_where_tied():
    seven_b, small = QWEN["Qwen2.5-7B-Instruct"], QWEN["Qwen2.5-0.5B-Instruct"]
    rows, linear = seven_b.linear_rows_and_parameters()
    assert weight_bytes(seven_b, "original") == 2 * seven_b.parameters()
    assert weight_bytes(seven_b, "int8") == linear + 2 * rows + 2 * seven_b.other_parameters()
    assert 0.5 < weight_bytes(seven_b, "int8") / weight_bytes(seven_b, "original") < 0.55
    assert linear - small.linear_rows_and_parameters()[1] > seven_b.vocab * seven_b.hidden  # its head is in there
    assert small.other_parameters() > small.vocab * small.hidden  # the tied head is the 16-bit embeddings


def test_the_readme_table_is_the_computed_one():
    table = memory_table()
    seven_b = QWEN["Qwen2.5-7B-Instruct"]
    expected = memory_needed(weight_bytes(seven_b, "int8"), kv_cache_bytes(seven_b, 8 * 4096)) / GIB
    assert f"| Qwen2.5-7B-Instruct | int8 | {weight_bytes(seven_b, 'int8') / GIB:.1f} |" in table
    assert f" {expected:.1f} |" in table
    readme = (Settings().prompts_dir.parent / "docs" / "deployment.md").read_text()
    assert table in readme, "docs/deployment.md's memory table is stale: paste `python -m modelprep.sizing` into it"
    assert memory_needed(0, 0) == RUNTIME_BYTES


def test_the_shape_is_read_from_config_json(tiny_model_dir):
    config = json.loads((tiny_model_dir / "config.json").read_text())
    shape = ModelShape.from_config(config)
    assert (shape.layers, shape.hidden, shape.kv_heads) == (config["num_hidden_layers"], config["hidden_size"],
                                                            config["num_key_value_heads"])


def test_a_kv_cache_too_small_for_one_context_is_refused(tiny_model_dir):
    shape = ModelShape.from_config(json.loads((tiny_model_dir / "config.json").read_text()))
    tokens = 64 * GIB // kv_cache_bytes(shape, 1)  # more than the 1 GiB below holds
    settings = Settings(model="x", dtype="bfloat16", kv_cache_gib=1, max_model_len=tokens, max_new_tokens=16)
    with pytest.raises(ModelLoadError, match=r"Raise CHAT_KV_CACHE_GIB \(or set it to 0 .*\) or lower CHAT_MAX_MODEL_LEN"):
        check_model(tiny_model_dir, settings, flags=frozenset({"avx2", "avx512_bf16"}), available_bytes=64 * GIB)


def test_the_kv_cache_is_sized_for_every_chat_at_full_context_unless_set():
    config = {"num_hidden_layers": 24, "hidden_size": 896, "num_attention_heads": 14, "num_key_value_heads": 2,
              "intermediate_size": 4864, "vocab_size": 151_936, "tie_word_embeddings": True}
    per_token = 2 * 24 * 2 * 64 * 2  # bfloat16
    assert kv_cache_budget(config, 8, 4096, "bfloat16", 0) == 8 * 4096 * per_token
    assert kv_cache_budget(config, 1, 100, "bfloat16", 0) == 4 * KV_BLOCK_TOKENS * per_token  # whole blocks
    assert kv_cache_budget(config, 8, 4096, "float32", 0) == 2 * 8 * 4096 * per_token
    assert kv_cache_budget(config, 8, 4096, "bfloat16", 1.5) == int(1.5 * GIB)
