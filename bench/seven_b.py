"""A model of the size client sites run, for the benchmark: Qwen2.5-7B-Instruct's exact shape with random weights.

No 7B weights are reachable from the machines this project is built on (they reach PyPI, Debian and npm only), and speed does not
depend on the weights' values: the same shapes, dtypes and kernels cost the same whatever numbers they
hold. So this builds, once into the cache, a bf16 Hugging Face folder with Qwen2.5-7B-Instruct's published
configuration (28 layers, hidden 3584, 28 query / 4 KV heads, intermediate 18,944, vocabulary 152,064, an
untied output head) and the demo model's tokenizer and chat template, one safetensors shard at a time
(15.2 GB). Its text is gibberish; the benchmark ignores end-of-sequence and times fixed lengths.

`python -m bench.seven_b [--weights int8 int4]` compares this app (the model in int8 by our quantise command,
and in 4 bits where the CPU runs them) with `llama-server` (8 slots, on Q8_0 and Q4_K_M files made by llama.cpp's
own converter and `llama-quantize`) at 1 and 8 chats of 32 new tokens, and records what the app holds in memory.
The 4-bit copy is made by the same command as the demo's, AutoRound, rounding to nearest: random weights have
nothing to calibrate, and the layout and kernel are the same. Peak disk stays under 30 GB: the bf16 folder is
deleted once the app's copies are made and written again (same seed, same numbers) for the GGUF files, and
Q4_K_M is quantised from the Q8_0 file (no 15 GB bf16 GGUF in between); every copy is deleted after its run, so
a second run builds them again (about 20 minutes). Writes `docs/benchmark/seven_b.json` and `seven_b.md`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file
from tqdm import tqdm
from transformers import AutoTokenizer

from bench import llama_server
from bench.versus import run_app, run_llama_servers, write
from bench.workload import DEMO, stage_parser
from config.settings import load_settings
from modelprep.cache import build_once
from modelprep.hardware import int4_kernel
from modelprep.quantization.int4 import quantize_int4
from modelprep.quantization.int8 import quantize_folder
from modelprep.source import resolve_model

CONFIG = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu", "hidden_size": 3584,
    "intermediate_size": 18_944, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
    "max_position_embeddings": 32_768, "max_window_layers": 28, "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0,
    "sliding_window": 131_072, "use_sliding_window": False, "tie_word_embeddings": False, "vocab_size": 152_064,
    "bos_token_id": 151_643, "eos_token_id": 151_645, "attention_dropout": 0.0, "initializer_range": 0.02,
    "torch_dtype": "bfloat16", "use_cache": True,
}
NAME = "Qwen2.5-7B-Instruct-shape-random"
LAYERS_PER_SHARD = 4
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def seven_b(cache_dir: Path, tokenizer_folder: Path) -> Path:
    """The folder of the 7B-shaped random model (built the first time: a few minutes, 15.2 GB)."""
    return build_once(cache_dir / "bench" / NAME, lambda out: _build(out, tokenizer_folder))


def _layer(index: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    hidden, inter = CONFIG["hidden_size"], CONFIG["intermediate_size"]
    kv = CONFIG["num_key_value_heads"] * hidden // CONFIG["num_attention_heads"]
    prefix = f"model.layers.{index}."
    shapes = {"self_attn.q_proj.weight": (hidden, hidden), "self_attn.q_proj.bias": (hidden,),
              "self_attn.k_proj.weight": (kv, hidden), "self_attn.k_proj.bias": (kv,),
              "self_attn.v_proj.weight": (kv, hidden), "self_attn.v_proj.bias": (kv,),
              "self_attn.o_proj.weight": (hidden, hidden), "mlp.gate_proj.weight": (inter, hidden),
              "mlp.up_proj.weight": (inter, hidden), "mlp.down_proj.weight": (hidden, inter)}
    tensors = {prefix + name: _random(shape, generator) for name, shape in shapes.items()}
    for norm in ("input_layernorm.weight", "post_attention_layernorm.weight"):
        tensors[prefix + norm] = torch.ones(hidden, dtype=torch.bfloat16)
    return tensors


def _random(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    return (torch.randn(shape, generator=generator) * CONFIG["initializer_range"]).to(torch.bfloat16)


def _build(out: Path, tokenizer_folder: Path) -> None:
    generator = torch.Generator().manual_seed(7)
    vocab, hidden, layers = CONFIG["vocab_size"], CONFIG["hidden_size"], CONFIG["num_hidden_layers"]
    shards = [range(start, min(start + LAYERS_PER_SHARD, layers)) for start in range(0, layers, LAYERS_PER_SHARD)]
    names = [f"model-{number:05d}-of-{len(shards) + 1:05d}.safetensors" for number in range(1, len(shards) + 2)]
    weight_map = {}
    for name, layer_range in tqdm(list(zip(names, shards)), desc="Writing the 7B-shaped model"):
        tensors = {key: value for index in layer_range for key, value in _layer(index, generator).items()}
        save_file(tensors, out / name, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, name))
    ends = {"model.embed_tokens.weight": _random((vocab, hidden), generator),
            "lm_head.weight": _random((vocab, hidden), generator),
            "model.norm.weight": torch.ones(hidden, dtype=torch.bfloat16)}
    save_file(ends, out / names[-1], metadata={"format": "pt"})
    weight_map.update(dict.fromkeys(ends, names[-1]))
    (out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (out / "config.json").write_text(json.dumps(CONFIG, indent=1))
    for file in TOKENIZER_FILES:
        if (tokenizer_folder / file).is_file():
            shutil.copy(tokenizer_folder / file, out / file)


def _requantized(tools: Path, q8: Path, out: Path) -> None:
    subprocess.run([str(tools / "llama-quantize"), "--allow-requantize", str(q8), str(out / f"{NAME}-Q4_K_M.gguf"),
                    "Q4_K_M"], check=True)


def _app_copy(folder: Path, weights: str, out: Path) -> None:
    if weights == "int4":
        quantize_int4(folder, out, iterations=0)
    else:
        quantize_folder(folder, out)


def main() -> None:
    parser = stage_parser("seven_b", __doc__, tokens=32, repeats=1)
    parser.add_argument("--weights", nargs="+", choices=("int8", "int4"),
                        help="the app's formats, one after another (default: int8, and int4 where the CPU runs it)")
    arguments = parser.parse_args()
    formats = arguments.weights or ["int8"] + (["int4"] if int4_kernel() else [])
    settings = load_settings()
    demo = resolve_model(DEMO, settings.cache_dir, prepare=False, weights="original")
    tools = llama_server.build(settings.cache_dir)
    bench_dir = settings.cache_dir / "bench"
    tokenizer = AutoTokenizer.from_pretrained(demo)
    with tempfile.TemporaryDirectory() as scratch:
        # The app's copies first, from one bf16 folder, which then makes way for the GGUF files.
        copies = {weights: build_once(bench_dir / f"{NAME}-{weights}", lambda out, weights=weights: _app_copy(
            seven_b(settings.cache_dir, demo), weights, out)) for weights in formats}
        shutil.rmtree(bench_dir / NAME, ignore_errors=True)
        apps = []
        for weights, copy in copies.items():
            label = f", {weights} weights" if len(copies) > 1 else ""
            apps.append(run_app(copy, arguments.tokens, arguments.repeats, Path(scratch) / f"app-{weights}.log",
                                ready_timeout=1800, label=label))
            shutil.rmtree(copy)
        q8 = build_once(bench_dir / f"{NAME}-Q8_0", lambda out: llama_server.convert_q8(
            seven_b(settings.cache_dir, demo), out / f"{NAME}-Q8_0.gguf", settings.cache_dir)) / f"{NAME}-Q8_0.gguf"
        shutil.rmtree(bench_dir / NAME, ignore_errors=True)
        q4 = build_once(bench_dir / f"{NAME}-Q4_K_M", lambda out: _requantized(tools, q8, out)) / f"{NAME}-Q4_K_M.gguf"
        systems = run_llama_servers(tools, {"Q4_K_M": q4, "Q8_0": q8}, tokenizer, arguments.tokens,
                                    arguments.repeats, Path(scratch)) + apps
        shutil.rmtree(q8.parent)
        shutil.rmtree(q4.parent)
    write({"model": NAME, "weights": "random, Qwen2.5-7B-Instruct's shape", "formats": formats,
           "new_tokens": arguments.tokens, "repeats": arguments.repeats, "systems": systems}, arguments.out)


if __name__ == "__main__":
    main()
