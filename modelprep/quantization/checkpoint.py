"""The files of a model folder as quantisation reads and writes them: its config, its weights' index, the files
beside the weights, and which weights a folder holds (`weight_format`, which the engine and the bundle read too).
Knows nothing of the app.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from config.errors import ModelLoadError
from modelprep.cache import MANIFEST

INDEX = "model.safetensors.index.json"


def source_config(source: Path) -> dict:
    """`source`'s config.json, if it is a model folder not quantised yet."""
    try:
        config = json.loads((source / "config.json").read_text())
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"{source} has no readable config.json ({error}); point at a model folder.") from None
    method = config.get("quantization_config", {}).get("quant_method")
    if method:
        raise ModelLoadError(f"{source} is already quantised ({method}); quantise its 16-bit original instead.")
    return config


def copy_companions(source: Path, out: Path) -> None:
    """The files beside the weights (tokenizer, template, generation config, licence, ...) that `out` lacks."""
    for path in source.iterdir():
        if path.is_file() and path.suffix != ".safetensors" and path.name not in (INDEX, MANIFEST) and not (
                out / path.name).exists():
            shutil.copy2(path, out / path.name)


def weight_format(folder: Path) -> str:
    """"int8" or "int4" for a folder this command wrote (or any compressed-tensors model whose linear layers are
    int8, or 4-bit), else the config's dtype."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return "unknown"
    groups = config.get("quantization_config", {}).get("config_groups", {})
    bits = {group.get("weights", {}).get("num_bits") for group in groups.values() if "Linear" in group.get("targets", [])}
    if bits & {4, 8}:
        return f"int{min(bits & {4, 8})}"
    return str(config.get("dtype") or config.get("torch_dtype") or "unknown")
