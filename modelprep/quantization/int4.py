"""A 4-bit copy of a Hugging Face model folder, for CPUs where vLLM's 4-bit kernel runs (`modelprep.hardware.
int4_kernel`); `python -m modelprep.quantization --weights int4 SOURCE OUT` makes one.

Intel's AutoRound (SignRound: each decoder block's rounding and scales tuned on calibration text so that the
block's output stays close to the original's) makes the decoder's linear layers 4-bit, symmetric, one scale per
128 weights, in the `compressed-tensors` pack-quantized layout vLLM loads. The calibration text is the
project's own writing, Chinese and English (`knowledge/` and `docs/`), never the held-out text `bench.studies.quality`
measures on. An output head of its own (untied, as in Qwen2.5-7B) becomes int8 as `modelprep.quantization`
makes it: 4 bits cost it much more than the rest (docs/design-figures.md); a tied head stays 16-bit with the embeddings it shares. Knows nothing of the app.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file

from config.settings import PROJECT_ROOT
from modelprep.quantization.checkpoint import INDEX, copy_companions, source_config
from modelprep.quantization.int8 import INT8_SCHEME, quantize_weight

GROUP_SIZE = 128
CALIBRATION = [PROJECT_ROOT / "knowledge", PROJECT_ROOT / "docs"]
# AutoRound's "light" recipe: 50 tuning steps a block, on 32 windows of 256 tokens.
ITERATIONS = 50
SAMPLES = 32
SEQUENCE = 256


def calibration_texts() -> list[str]:
    return [path.read_text(encoding="utf-8") for folder in CALIBRATION for path in sorted(folder.glob("*.md"))]


def quantize_int4(source: Path, out: Path, iterations: int = ITERATIONS, samples: int = SAMPLES) -> None:
    """Write the 4-bit model of the bf16/fp16/fp32 model folder `source` into the existing folder `out`.
    `iterations=0` rounds to nearest without calibration, one block in memory at a time (the benchmark's
    random-weight model: same layout and kernel, nothing to calibrate)."""
    from auto_round import AutoRound  # imports datasets and accelerate: only when a model is quantised

    config = source_config(source)
    plain = {"disable_opt_rtn": True, "low_cpu_mem_usage": True} if iterations == 0 else {}
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        rounder = AutoRound(str(source), scheme="W4A16", sym=True, group_size=GROUP_SIZE, iters=iterations,
                            dataset=calibration_texts(), nsamples=samples, seqlen=SEQUENCE, batch_size=4,
                            device_map="cpu", layer_config={"lm_head": {"bits": 16}}, **plain)
        _, written = rounder.quantize_and_save(scratch, format="llm_compressor")  # a folder named after the scheme
        for path in Path(written).iterdir():
            if path.is_file() and path.name != "quantization_config.json":
                shutil.move(path, out / path.name)
    if not config.get("tie_word_embeddings"):
        _int8_head(out)
        saved = json.loads((out / "config.json").read_text())
        settings = saved["quantization_config"]
        settings["config_groups"]["group_1"] = {"targets": ["re:.*lm_head"], "format": "int-quantized", **INT8_SCHEME}
        settings["ignore"] = [name for name in settings["ignore"] if name != "lm_head"]
        settings["format"] = "mixed-precision"
        (out / "config.json").write_text(json.dumps(saved, indent=2))
    copy_companions(source, out)  # a tokenizer file or licence AutoRound did not copy


def _int8_head(folder: Path) -> None:
    """The 16-bit `lm_head.weight` AutoRound left, made int8 in place, with its scale beside it."""
    index = folder / INDEX
    weight_map = json.loads(index.read_text())["weight_map"] if index.is_file() else None
    shard = folder / (weight_map["lm_head.weight"] if weight_map else "model.safetensors")
    with safe_open(shard, framework="pt") as weights:
        tensors = {name: weights.get_tensor(name) for name in weights.keys()}
        metadata = weights.metadata()
    tensors["lm_head.weight"], tensors["lm_head.weight_scale"] = quantize_weight(tensors["lm_head.weight"])
    save_file(tensors, shard, metadata=metadata)
    if weight_map:
        content = json.loads(index.read_text())
        content["weight_map"]["lm_head.weight_scale"] = shard.name
        index.write_text(json.dumps(content, indent=2))
