"""The two models every comparison runs: a 16-bit folder and its int8 copy (by default the demo model's)."""

from __future__ import annotations

from pathlib import Path

from bench.workload import DEMO
from config.settings import load_settings
from modelprep.cache import build_once
from modelprep.quantization.int8 import quantize_folder
from modelprep.source import resolve_model


def model_pair(model: Path | None, int8: Path | None, scratch: Path) -> tuple[Path, Path]:
    """`model` and `int8` as given; an int8 copy of `model` quantised into `scratch` if only `model` is; the
    demo model's two prepared folders if neither is."""
    if model:
        return model, int8 or build_once(scratch / "int8", lambda out: quantize_folder(model, out))
    cache = load_settings().cache_dir
    return (resolve_model(DEMO, cache, prepare=False, weights="original"),
            resolve_model(DEMO, cache, prepare=False, weights="int8"))
