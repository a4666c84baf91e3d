"""The machine's memory read bandwidth, measured on the spot, and the decode ceiling it implies.

Writing one token needs every weight read once from memory (the embedding excepted: one row of it),
so one stream cannot decode faster than bandwidth / bytes of weights read per token, whatever the
software. Bandwidth is the best of several full reads (a sum, all threads) of a buffer far larger than
any cache.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from safetensors import safe_open

from modelprep.preflight import STORED_BYTES


def read_bandwidth(gib: float = 1.0, repeats: int = 7) -> float:
    """Best bytes per second over `repeats` full reads of a `gib`-GiB buffer with all of torch's threads."""
    buffer = torch.ones(int(gib * 1024**3) // 4, dtype=torch.float32)
    buffer.sum()  # touch every page before timing
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        buffer.sum()
        best = min(best, time.perf_counter() - started)
    return buffer.numel() * buffer.element_size() / best


def bytes_per_token(folder: Path) -> int:
    """Bytes of weights one decode step reads: every tensor, except all but one row of the input embedding
    (read fully when it doubles as the output head)."""
    config = json.loads((folder / "config.json").read_text())
    total = 0
    for file in folder.glob("*.safetensors"):
        with safe_open(file, framework="pt") as weights:
            for name in weights.keys():
                tensor = weights.get_slice(name)
                size = STORED_BYTES[tensor.get_dtype()]
                shape = tensor.get_shape()
                elements = 1
                for length in shape:
                    elements *= length
                if name.endswith("embed_tokens.weight") and not config.get("tie_word_embeddings"):
                    elements = shape[1]
                total += elements * size
    return total
