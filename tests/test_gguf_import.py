"""GGUF to Hugging Face folder, on a tiny Qwen2 GGUF the tests write themselves."""

from pathlib import Path

import gguf
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from config.errors import ModelLoadError
from modelprep.gguf import convert_gguf
from tests.tiny_gguf import write_gguf

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def converted(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("converted")
    convert_gguf(write_gguf(tiny_model_dir, folder / "tiny.gguf"), folder)
    return folder


def test_converted_model_computes_what_the_original_does(tiny_model_dir, converted):
    original = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    copy = AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32)
    assert copy.config.tie_word_embeddings  # the GGUF had no output matrix, as for a tied model
    # Every tensor under its own name and shape; Q8_0 in the GGUF and bfloat16 here make it close, not equal.
    converted_tensors = copy.state_dict()
    for name, tensor in original.state_dict().items():
        assert converted_tensors[name].shape == tensor.shape, name
        assert (converted_tensors[name] - tensor).norm() <= 0.01 * tensor.norm(), name
    ids = torch.arange(5, 400, 7).unsqueeze(0)
    with torch.no_grad():
        expected, actual = original(ids).logits.flatten(), copy(ids).logits.flatten()
    assert torch.nn.functional.cosine_similarity(expected, actual, dim=0) > 0.999


def test_converted_tokenizer_and_template_match_the_original(tiny_tokenizer, converted):
    copy = AutoTokenizer.from_pretrained(converted)
    assert copy.get_vocab() == tiny_tokenizer.get_vocab()
    for text in ("你好，广州！Welcome 2024 🙂 早茶<|im_end|>", "  spaces\n\nand\ttabs, don't"):
        assert copy.encode(text) == tiny_tokenizer.encode(text)
    assert (copy.eos_token, copy.pad_token) == ("<|im_end|>", "<|endoftext|>")
    conversation = [{"role": "system", "content": "你是导游"}, {"role": "user", "content": "你好"},
                    {"role": "assistant", "content": "欢迎"}, {"role": "user", "content": "早茶?"}]
    assert (copy.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
            == tiny_tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True))
    assert (converted / "config.json").read_text().count('"Qwen2ForCausalLM"') == 1


def test_other_architectures_are_refused_with_a_reason(tmp_path):
    path = tmp_path / "other.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tokenizer_model("llama")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelLoadError, match="'llama' model .* qwen2 and qwen3"):
        convert_gguf(path, tmp_path / "out")
