"""What this CPU can run: the instruction-set flags that decide the default dtype and weight format, and the
cores this process may use.

Reads /proc/cpuinfo once; knows nothing of models or engines.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path


@cache
def cpu_flags() -> frozenset[str]:
    """The feature flags of the first CPU listed in /proc/cpuinfo (empty where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def fast_int8() -> bool:
    """Whether this CPU multiplies int8 natively (VNNI or AMX): there vLLM's int8 kernels beat 16-bit weights;
    elsewhere they lose to them (docs/design-figures.md)."""
    return bool({"avx512_vnni", "avx_vnni", "amx_int8"} & cpu_flags())


def int4_kernel(flags: frozenset[str] | None = None) -> bool:
    """Whether vLLM's 4-bit weights run here, and fast: its W4A8 kernel (4-bit weights, each token's activations
    in int8, bf16 around them; `engine.int4_kernel`) needs AVX-512 VNNI (or AMX) and bf16. vLLM's CPU build has
    its 4-bit kernels for AVX-512 only: an AWQ model crashed on an AVX2 CPU (vllm issue 55613)."""
    flags = cpu_flags() if flags is None else flags
    return bool({"avx512_vnni", "amx_int8"} & flags) and bool({"avx512_bf16", "amx_bf16"} & flags)


def cores() -> int:
    """The CPU cores this process may run on (its affinity, which containers and `taskset` narrow)."""
    return len(os.sched_getaffinity(0))


def resolve_dtype(setting: str) -> str:
    """`auto` becomes bfloat16 where the CPU computes it natively (avx512_bf16 or AMX), else float32."""
    if setting != "auto":
        return setting
    native_bf16 = {"avx512_bf16", "amx_bf16"} & cpu_flags()
    return "bfloat16" if native_bf16 else "float32"
