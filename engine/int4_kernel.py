"""vLLM plugin: 4-bit weights on vLLM's W4A8 kernel wherever it runs (`modelprep.hardware.int4_kernel`), not
only on CPUs with AMX.

vLLM 0.30's CPU kernel for 4-bit checkpoints (`CPUWNA16LinearKernel`) has two paths. W4A16 turns every weight
back into bf16 for every product, slower than int8. W4A8 (`int4_scaled_mm_cpu`) quantises each token's
activations to int8 and multiplies with VNNI, faster than vLLM's int8 kernel and close to a float product
(docs/design-figures.md). vLLM takes W4A8 only where the CPU has
AMX tiles; the kernel itself needs AVX-512 VNNI. `register` (vLLM calls it in every process it starts, through
the `vllm.general_plugins` entry point in pyproject.toml) lets a 4-bit layer take W4A8 wherever `int4_kernel`
holds; elsewhere vLLM decides as it would.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from functools import wraps

import torch

from modelprep.hardware import int4_kernel

log = logging.getLogger(__name__)


@contextmanager
def _amx_reported():
    """vLLM's kernel asks torch whether the CPU has AMX tiles; within this block the answer is yes."""
    real = torch.cpu._is_amx_tile_supported
    torch.cpu._is_amx_tile_supported = lambda: True
    try:
        yield
    finally:
        torch.cpu._is_amx_tile_supported = real


def register() -> None:
    if not int4_kernel() or torch.cpu._is_amx_tile_supported():
        return
    from vllm.model_executor.kernels.linear.mixed_precision.cpu import CPUWNA16LinearKernel

    load_weights = CPUWNA16LinearKernel.process_weights_after_loading
    if getattr(load_weights, "w4a8_with_vnni", False):  # vLLM may load plugins more than once in a process
        return

    @wraps(load_weights)
    def load_weights_for_w4a8(self, layer: torch.nn.Module) -> None:
        with _amx_reported():
            load_weights(self, layer)
        if not getattr(layer, "use_w4a8", False):
            log.warning("A 4-bit layer runs on vLLM's slow W4A16 path (activations %s, not bf16)", self.config.act_type)

    load_weights_for_w4a8.w4a8_with_vnni = True
    CPUWNA16LinearKernel.process_weights_after_loading = load_weights_for_w4a8
