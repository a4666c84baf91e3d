"""`python -m bench.profile`: where a decode step of this app's engine spends its time, sampled, not guessed.

The app's engine (`VllmEngine`, the app's settings and default sampling: temperature, top-p, top-k and
a repetition penalty over the whole vocabulary) decodes eight chats at once while `py-spy` samples both
the process that runs the model (vLLM's engine core) and this one (where vLLM turns token ids into text),
native frames included (py-spy pauses a process for each sample, which slows the run a little; the
decode rate while sampled is reported). Every sample is put in the first matching part of a step (`PARTS`) by its stack
and the shares are written to `docs/benchmark/profile.json` (or `--out`) with the decode rate of the run.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from bench.engine_runs import start_replies
from bench.workload import DEMO, prompts
from config.settings import PROJECT_ROOT, load_settings
from engine.api import Sampling
from engine.vllm_engine import VllmEngine
from modelprep.source import resolve_model

# A part of a decode step and the frames that mark it, most specific first; a sample goes to the first
# part one of whose markers is in its stack.
PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("sampler: penalties, top-k/top-p, drawing", ("vllm/v1/sample/",)),
    ("output head: logits over the vocabulary", ("compute_logits", "logits_processor")),
    ("attention", ("attention", "paged_attention", "cpu_attn")),
    ("linear layers (matrix products)", ("linear.py", "dnnl", "gemm", "sgemm", "mkl")),
    ("model: other layers (norms, activation, rotary, embedding)", ("model_executor/models/", "layernorm",
                                                                    "activation", "rotary")),
    ("model runner: inputs and outputs of a step", ("cpu_model_runner", "gpu_model_runner", "input_batch")),
    ("scheduler and KV-block bookkeeping", ("vllm/v1/core/",)),
    ("text from token ids (detokenising)", ("detokeniz", "output_processor", "tokenizers")),
    ("messages between processes", ("zmq", "msgspec", "serial_utils", "core_client", "process_input_sockets",
                                    "process_output_sockets")),
]
# Samples per second: py-spy pauses a process to read native stacks, so the decode rate while sampled is lower.
RATE = 50
IDLE = ("poll (", "select (", "epoll", "wait (", "_recv", "recv_multipart", "sleep", "Condition.wait")


def part_of(stack: str) -> str:
    for name, markers in PARTS:
        if any(marker in stack for marker in markers):
            return name
    if any(marker in stack.rsplit(";", 1)[-1] for marker in IDLE):
        return "idle (waiting for work)"
    return "other"


def shares(raw: Path, thread: str) -> dict[str, float]:
    """py-spy's raw output (one `frames count` line per stack) as the share of samples in each part, over the
    stacks of the thread whose outermost frames include `thread`."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if thread in stack:
            counts[part_of(stack)] += int(count)
    total = sum(counts.values()) or 1
    return {name: round(count / total, 3) for name, count in counts.most_common()}


async def decode(engine: VllmEngine, chats: int, tokens: int, sample: Callable[[], list[subprocess.Popen]]) -> dict:
    """`chats` replies at the app's default sampling; `sample` starts the samplers once every chat has its first
    token (prefill is not a decode step). Returns the samplers and the aggregate decode rate meanwhile."""
    settings = engine.settings
    sampling = Sampling(*settings.sampling_defaults(), tokens, top_k=settings.top_k,
                        repetition_penalty=settings.repetition_penalty, ignore_eos=True)
    rendered = prompts(engine.tokenizer, "profile", chats, engine.settings.max_model_len)
    replies, stats = start_replies(engine, [(prompt, sampling) for prompt in rendered])
    while not all(reply.first_token_at for reply in stats):
        await asyncio.sleep(0.05)
    samplers, started, before = sample(), time.perf_counter(), sum(reply.generated_tokens for reply in stats)
    await replies
    rate = (sum(reply.generated_tokens for reply in stats) - before) / (time.perf_counter() - started)
    return {"samplers": samplers, "rate": rate}


def run(chats: int = 8, tokens: int = 320, seconds: int = 30) -> dict:
    settings = load_settings()
    engine = VllmEngine.load(settings, resolve_model(DEMO, settings.cache_dir, prepare=False,
                                                     weights=settings.weights))
    spy = Path(sys.executable).with_name("py-spy")
    core = next(child.pid for child in psutil.Process().children(recursive=True)
                if "EngineCore" in " ".join(child.cmdline()))
    try:
        with tempfile.TemporaryDirectory() as folder:
            # Each process's thread that does the work: vLLM's engine-core loop, and the app's engine thread.
            raws = {"engine core (runs the model)": (core, Path(folder) / "core.txt", "run_busy_loop"),
                    "web process (AsyncLLM, text)": (os.getpid(), Path(folder) / "web.txt", "run_engine_loop")}

            def sample() -> list[subprocess.Popen]:
                return [subprocess.Popen([str(spy), "record", "--pid", str(pid), "--native", "--format", "raw",
                                          "--rate", str(RATE), "--duration", str(seconds), "--output", str(raw)],
                                         stdout=subprocess.DEVNULL) for pid, raw, _ in raws.values()]

            measured = asyncio.run(decode(engine, chats, tokens, sample))
            for sampler in measured["samplers"]:
                sampler.wait(timeout=seconds + 60)
            return {"chats": chats, "tokens": tokens, "sampled_seconds": seconds, "samples_per_s": RATE,
                    "decode_tokens_per_s": round(measured["rate"], 1), "weights": engine.weight_format,
                    "dtype": engine.dtype,
                    "processes": {name: shares(raw, thread) for name, (_, raw, thread) in raws.items()}}
    finally:
        engine.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "benchmark" / "profile.json")
    arguments = parser.parse_args()
    result = run()
    arguments.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
