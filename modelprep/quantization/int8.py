"""An int8 copy of a Hugging Face model folder, which vLLM runs faster on CPU (`python -m modelprep.quantization`
makes one).

Every linear layer of the decoder, and the output head where it is not the embeddings' matrix (an untied
head, as in Qwen2.5-7B), gets int8 weights, rounded to nearest with one scale per output channel; at run
time vLLM quantises each token's activations to int8 on the fly and multiplies with oneDNN's int8 kernels.
The files follow the `compressed-tensors` "int-quantized" layout vLLM loads (`*.weight` int8,
`*.weight_scale` beside it, a `quantization_config` in `config.json`). A tied head stays 16-bit, with the
embeddings it shares; embeddings, norms and biases are copied as they are.
Works shard by shard, so a 7B model needs about one shard of memory. Knows nothing of the app.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from tqdm import tqdm
from transformers import AutoConfig, AutoModelForCausalLM

from config.errors import ModelLoadError
from modelprep.quantization.checkpoint import INDEX, copy_companions, source_config

# int8 weights, one scale per output row; each token's activations made int8 as it comes (vLLM's oneDNN path).
INT8_SCHEME = {
    "weights": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel", "dynamic": False},
    "input_activations": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token", "dynamic": True},
}


def quantization_config(tied_head: bool) -> dict:
    """vLLM's `quantization_config`: every linear layer, and the output head unless it is tied (vLLM's head is
    no `Linear`, so it is named)."""
    return {
        "quant_method": "compressed-tensors",
        "format": "int-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"] + ([] if tied_head else ["re:.*lm_head"]), **INT8_SCHEME}},
        "ignore": ["lm_head"] if tied_head else [],
    }


def quantize_folder(source: Path, out: Path) -> None:
    """Write the int8 model of the bf16/fp16/fp32 model folder `source` into the existing folder `out`."""
    config = source_config(source)
    shards = sorted(source.glob("*.safetensors"))
    if not shards:
        raise ModelLoadError(f"{source} has no .safetensors weights; this command converts safetensors folders "
                             "only (as published on ModelScope and Hugging Face).")
    linear = _linear_weights(source)
    scales = {}
    with tqdm(total=sum(path.stat().st_size for path in shards), unit="B", unit_scale=True,
              desc="Quantising to int8") as bar:
        for shard in shards:
            tensors = {}
            with safe_open(shard, framework="pt") as weights:
                for name in weights.keys():
                    tensor = weights.get_tensor(name)
                    if name in linear:
                        if not tensor.is_floating_point():
                            raise ModelLoadError(f"{name} in {shard.name} holds {tensor.dtype} weights; only "
                                                 "16- or 32-bit floating-point models can be quantised.")
                        tensors[name], tensors[name + "_scale"] = quantize_weight(tensor)
                        scales[name + "_scale"] = shard.name
                    else:
                        tensors[name] = tensor
                    bar.update(tensor.numel() * tensor.element_size())
            save_file(tensors, out / shard.name, metadata={"format": "pt"})
    if scales.keys() != {name + "_scale" for name in linear}:
        raise ModelLoadError(f"{source} lacks weights of {len(linear) - len(scales)} linear layers; "
                             "the folder is incomplete.")
    if (source / INDEX).is_file():
        index = json.loads((source / INDEX).read_text())
        index["weight_map"].update(scales)
        (out / INDEX).write_text(json.dumps(index, indent=2))
    config["quantization_config"] = quantization_config(bool(config.get("tie_word_embeddings")))
    (out / "config.json").write_text(json.dumps(config, indent=2))
    copy_companions(source, out)


def quantize_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per output channel, round to nearest: `weight ≈ int8 * scale`, scale shaped (rows, 1).

    The scale is stored in the weight's dtype, as vLLM loads it; the weights are rounded against that stored
    scale (rounded up, so the largest weight of a row still fits in ±127), so every weight is within half
    a step of its original.
    """
    full = weight.float()
    exact = full.abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / 127
    stored = exact.to(weight.dtype)
    stored = torch.where(stored.float() < exact, torch.nextafter(stored, torch.full_like(stored, torch.inf)), stored)
    return torch.round(full / stored.float()).clamp(-127, 127).to(torch.int8), stored


def _linear_weights(source: Path) -> set[str]:
    """Names of the `.weight` tensors of the linear layers to quantise, from the model's own module tree: the
    decoder's, and the output head unless it is tied to the embeddings."""
    config = AutoConfig.from_pretrained(source)
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config)
    return {f"{name}.weight" for name, module in skeleton.named_modules()
            if isinstance(module, torch.nn.Linear) and (name != "lm_head" or not config.tie_word_embeddings)}
