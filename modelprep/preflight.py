"""Checks on a model folder before the engine starts, each failing with a message that says what to do.

The folder must hold a config, a tokenizer with a chat template and an architecture vLLM runs; the
CPU must run the chosen dtype, and 4-bit weights only where it has their kernel; weights, KV cache and the runtime must fit in the memory available.
Catching these here turns a minute of vLLM start-up and a traceback into one line. Reads files and
machine facts; starts nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import torch
from safetensors import safe_open
from vllm.model_executor.models import ModelRegistry
from vllm.platforms import CpuArchEnum, current_platform

from config.errors import ModelLoadError
from config.settings import Settings
from modelprep.hardware import cpu_flags, int4_kernel, resolve_dtype
from modelprep.sizing import GIB, RUNTIME_BYTES, ModelShape, kv_cache_budget, kv_cache_for_chats, memory_needed

STORED_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
                 "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
_FLOATS = {"F64", "F32", "F16", "BF16"}


def check_model(folder: Path, settings: Settings, *, flags: frozenset[str] | None = None,
                available_bytes: int | None = None) -> None:
    """Raise `ModelLoadError` with the reason if the engine could not run `folder` with `settings` here."""
    check_files(folder)
    check_architecture(folder)
    flags = cpu_flags() if flags is None else flags
    check_dtype(settings.dtype, flags)
    dtype = resolve_dtype(settings.dtype)
    config = _read_json(folder / "config.json")
    check_4bit(folder.name, config, flags)
    kv_cache = kv_cache_budget(config, settings.max_concurrent_replies, settings.max_model_len, dtype,
                               settings.kv_cache_gib)
    one_context = kv_cache_for_chats(ModelShape.from_config(config), 1, settings.max_model_len, dtype)
    if one_context > kv_cache:
        raise ModelLoadError(
            f"One chat of CHAT_MAX_MODEL_LEN={settings.max_model_len} tokens needs {one_context / GIB:.1f} GiB of KV "
            f"cache with {folder.name}, more than CHAT_KV_CACHE_GIB={settings.kv_cache_gib:g}. Raise "
            "CHAT_KV_CACHE_GIB (or set it to 0 to size it automatically) or lower CHAT_MAX_MODEL_LEN."
        )
    needed = memory_needed(weight_bytes(folder, dtype), kv_cache)
    available = psutil.virtual_memory().available if available_bytes is None else available_bytes
    if needed > available:
        raise ModelLoadError(
            f"{folder.name} needs about {needed / GIB:.1f} GiB (weights, {kv_cache / GIB:.1f} GiB of KV cache "
            f"and {RUNTIME_BYTES / GIB:.2g} GiB for the runtime) but only {available / GIB:.1f} GiB of memory is "
            "available. Lower CHAT_KV_CACHE_GIB (if set), CHAT_MAX_CONCURRENT_REPLIES or CHAT_MAX_MODEL_LEN, free "
            "memory, or use a smaller or int8 model."
        )


def check_files(folder: Path) -> None:
    if not folder.is_dir():
        raise ModelLoadError(f"The model {folder} is not a folder. Set CHAT_MODEL to a folder that holds "
                             "config.json, the weights and the tokenizer, or to a .gguf file.")
    missing = [name for name in ("config.json", "tokenizer.json", "tokenizer_config.json")
               if not (folder / name).is_file()]
    if missing:
        raise ModelLoadError(f"The model folder {folder} lacks {', '.join(missing)}. Copy the complete model "
                             "folder (as downloaded from ModelScope or Hugging Face).")
    tokenizer_config = _read_json(folder / "tokenizer_config.json")
    if "chat_template" not in tokenizer_config and not (folder / "chat_template.jinja").is_file():
        raise ModelLoadError(f"The tokenizer in {folder} has no chat template, so it cannot render a chat. "
                             "Use an instruct (chat) model.")


def check_architecture(folder: Path) -> None:
    architectures = _read_json(folder / "config.json").get("architectures") or []
    if not set(architectures) & ModelRegistry.get_supported_archs():
        raise ModelLoadError(f"The model in {folder} is a {' / '.join(architectures) or 'model of unknown kind'}, "
                             "which vLLM cannot run. Use a Qwen instruct model (Qwen2ForCausalLM, Qwen3ForCausalLM).")


def check_dtype(setting: str, flags: frozenset[str]) -> None:
    dtype = resolve_dtype(setting)
    if current_platform.get_cpu_architecture() == CpuArchEnum.X86 and "avx2" not in flags:
        raise ModelLoadError("This CPU lacks AVX2, the least vLLM's CPU engine needs on x86; it cannot run here.")
    if getattr(torch, dtype) not in current_platform.supported_dtypes:
        raise ModelLoadError(f"This CPU cannot run CHAT_DTYPE={dtype}; use CHAT_DTYPE=auto.")


def check_4bit(name: str, config: dict, flags: frozenset[str]) -> None:
    """4-bit weights (ours, or a GPTQ or AWQ checkpoint) only where vLLM's 4-bit kernel runs."""
    quantization = config.get("quantization_config") or {}
    bits = {group.get("weights", {}).get("num_bits") for group in quantization.get("config_groups", {}).values()}
    if 4 in bits | {quantization.get("bits")} and not int4_kernel(flags):
        raise ModelLoadError(f"{name} has 4-bit weights, and vLLM's 4-bit kernel needs AVX-512 VNNI and bf16, which "
                             "this CPU lacks: it would crash (vLLM issue 55613) or crawl. Use the model's 16-bit "
                             "original (with CHAT_WEIGHTS=int8 for int8 weights).")


def weight_bytes(folder: Path, dtype: str) -> int:
    """Bytes the weights take in memory: floating-point tensors in `dtype`, others (int8, scales) as stored."""
    dtype_bytes = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
    total = 0
    for file in folder.glob("*.safetensors"):
        with safe_open(file, framework="pt") as tensors:
            for name in tensors.keys():
                tensor = tensors.get_slice(name)
                stored = tensor.get_dtype()
                element = dtype_bytes if stored in _FLOATS else STORED_BYTES.get(stored, 4)
                total += torch.Size(tensor.get_shape()).numel() * element
    return total or sum(file.stat().st_size for file in folder.glob("*.bin"))


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"{path} cannot be read as JSON ({error}); copy the model folder again.") from None
