"""Before the engine starts: each thing that would make it fail is caught with a one-line reason."""

import json
import shutil

import pytest
from safetensors.torch import load_file

from config.errors import ModelLoadError
from config.settings import Settings
from modelprep.preflight import GIB, check_model, weight_bytes

pytestmark = pytest.mark.fast

SETTINGS = Settings(model="x", dtype="bfloat16", kv_cache_gib=2)
AVX512 = frozenset({"avx2", "avx512f", "avx512_bf16"})


@pytest.fixture
def model(tiny_model_dir, tmp_path):
    return shutil.copytree(tiny_model_dir, tmp_path / "model")


def test_a_complete_model_passes(model):
    check_model(model, SETTINGS, flags=AVX512, available_bytes=64 * GIB)


@pytest.mark.parametrize("break_it, message", [
    (lambda model: shutil.rmtree(model), "is not a folder"),
    (lambda model: (model / "config.json").unlink(), "lacks config.json"),
    (lambda model: (model / "tokenizer.json").unlink(), "lacks tokenizer.json"),
    (lambda model: _edit_json(model / "tokenizer_config.json", chat_template=None), "no chat template"),
    (lambda model: _edit_json(model / "config.json", architectures=["BogusForCausalLM"]),
     "BogusForCausalLM, which vLLM cannot run"),
    (lambda model: (model / "config.json").write_text("{not json"), "cannot be read as JSON"),
])
def test_a_broken_folder_is_named_with_the_reason(model, break_it, message):
    break_it(model)
    with pytest.raises(ModelLoadError, match=message):
        check_model(model, SETTINGS, flags=AVX512, available_bytes=64 * GIB)


def test_a_cpu_without_avx2_is_refused(model):
    with pytest.raises(ModelLoadError, match="lacks AVX2"):
        check_model(model, SETTINGS, flags=frozenset({"sse4_2"}), available_bytes=64 * GIB)


@pytest.mark.parametrize("quantization", [
    {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"targets": ["Linear"],
                                                                         "weights": {"num_bits": 4}}}},
    {"quant_method": "awq", "bits": 4, "group_size": 128}, {"quant_method": "gptq", "bits": 4, "group_size": 128}])
def test_4bit_weights_are_refused_on_a_cpu_without_their_kernel(model, quantization):
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "quantization_config": quantization}))
    with pytest.raises(ModelLoadError, match=r"model has 4-bit weights.*AVX-512 VNNI and bf16.*crash"):
        check_model(model, SETTINGS, flags=frozenset({"avx2", "fma", "avx_vnni"}), available_bytes=64 * GIB)
    check_model(model, SETTINGS, flags=AVX512 | {"avx512_vnni"}, available_bytes=64 * GIB)


def test_too_little_memory_is_refused_with_the_figures(model):
    with pytest.raises(ModelLoadError, match=r"needs about 5\.0 GiB .* 3 GiB for the runtime\) but only 3\.0 GiB .* CHAT_KV_CACHE_GIB"):
        check_model(model, SETTINGS, flags=AVX512, available_bytes=3 * GIB)


def test_weight_bytes_count_every_parameter_in_the_chosen_dtype(model):
    parameters = sum(tensor.numel() for tensor in load_file(model / "model.safetensors").values())
    assert weight_bytes(model, "bfloat16") == 2 * parameters
    assert weight_bytes(model, "float32") == 4 * parameters


def _edit_json(path, **changes):
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))
