"""llama.cpp's own server, the alternative a client site would pick, for the benchmark only (never the app's).

Built once into the cache from the llama.cpp source vendored in the `llama-cpp-python==0.3.36` sdist, for
this CPU's instruction sets without `GGML_NATIVE` (a native build died with "Illegal instruction" on a VM
whose CPU advertises AMX). Models are converted with llama.cpp's own tools: `convert_hf_to_gguf.py` (Q8_0
straight from a 16-bit folder, or bf16 first) and `llama-quantize` (Q4_K_M). `LlamaServer` runs
`llama-server` with parallel slots and continuous batching; `serve` sends it N chats at once with the same
rendered prompts (token ids) and sampling as the app gets, and times each streamed token.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import httpx

from engine.prompt import RenderedPrompt
from harness.app_process import free_port
from harness.figures import Reply, summarise
from modelprep.cache import build_once
from modelprep.hardware import cpu_flags

SDIST = ("llama-cpp-python", "0.3.36")
TARGETS = ("llama-server", "llama-quantize")
# Instruction sets llama.cpp's CPU backend can use, each switched on only where this CPU has it.
SIMD = {"GGML_AVX": "avx", "GGML_AVX2": "avx2", "GGML_FMA": "fma", "GGML_F16C": "f16c", "GGML_AVX512": "avx512f",
        "GGML_AVX512_VNNI": "avx512_vnni", "GGML_AVX512_BF16": "avx512_bf16"}


def build(cache_dir: Path) -> Path:
    """The folder with `llama-server` and `llama-quantize`, built for this CPU's instruction sets."""
    flags = cpu_flags()
    simd = "-".join(sorted(name.removeprefix("GGML_").lower() for name, flag in SIMD.items() if flag in flags))
    return build_once(cache_dir / "llama.cpp" / f"{SDIST[1]}-{simd}", lambda out: _build(out, flags))


def converter(cache_dir: Path) -> Path:
    """llama.cpp's own Hugging Face to GGUF converter with its packages, as `converter.tar`."""
    return build_once(cache_dir / "llama.cpp" / f"{SDIST[1]}-converter", _pack_converter)


def _source(scratch: str) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", "-q", "-d", scratch,
                    f"{SDIST[0]}=={SDIST[1]}"], check=True)
    with tarfile.open(next(Path(scratch).glob("*.tar.gz"))) as sdist:
        sdist.extractall(scratch, filter="data")
    return next(Path(scratch).glob("llama_cpp_python-*")) / "vendor" / "llama.cpp"


def _build(out: Path, flags: frozenset[str]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        source = _source(scratch)
        options = [f"-D{name}={'ON' if flag in flags else 'OFF'}" for name, flag in SIMD.items()]
        subprocess.run(["cmake", "-S", str(source), "-B", str(source / "build"), "-DCMAKE_BUILD_TYPE=Release",
                        "-DGGML_NATIVE=OFF", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                        *options], check=True)
        subprocess.run(["cmake", "--build", str(source / "build"), "-j", str(os.cpu_count()), "--target", *TARGETS],
                       check=True)
        for target in TARGETS:
            (out / target).write_bytes((source / "build" / "bin" / target).read_bytes())
            (out / target).chmod(0o755)


def _pack_converter(out: Path) -> None:
    # An archive: the cache's manifest lists files, not folders.
    with tempfile.TemporaryDirectory() as scratch, tarfile.open(out / "converter.tar", "w") as archive:
        source = _source(scratch)
        archive.add(source / "convert_hf_to_gguf.py", "convert_hf_to_gguf.py")
        archive.add(source / "conversion", "conversion")
        archive.add(source / "gguf-py" / "gguf", "gguf")


def gguf(tools: Path, folder: Path, kind: str, cache_dir: Path) -> Path:
    """`folder` (a 16-bit Hugging Face folder) as a GGUF of `kind` (`Q8_0` or `Q4_K_M`), made once."""
    target = build_once(cache_dir / "gguf-bench" / f"{folder.name}-{kind}",
                        lambda out: _convert(tools, converter(cache_dir), folder, kind, out))
    return target / f"{folder.name}-{kind}.gguf"


def convert_q8(folder: Path, target: Path, cache_dir: Path) -> None:
    """`folder` (a Hugging Face folder) as the Q8_0 GGUF `target`, by llama.cpp's own converter."""
    _run_converter(converter(cache_dir), folder, target, "q8_0")


def _run_converter(converter_folder: Path, folder: Path, target: Path, outtype: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        with tarfile.open(converter_folder / "converter.tar") as archive:
            archive.extractall(scratch, filter="data")
        # Its own gguf package first on the path: the converter matches it, not the one the app pins.
        subprocess.run([sys.executable, f"{scratch}/convert_hf_to_gguf.py", str(folder), "--outfile", str(target),
                        "--outtype", outtype], check=True, env={**os.environ, "PYTHONPATH": scratch})


def _convert(tools: Path, converter_folder: Path, folder: Path, kind: str, out: Path) -> None:
    first = out / ("converted.gguf" if kind != "Q8_0" else f"{folder.name}-{kind}.gguf")
    _run_converter(converter_folder, folder, first, "q8_0" if kind == "Q8_0" else "bf16")
    if kind != "Q8_0":
        subprocess.run([str(tools / "llama-quantize"), str(first), str(out / f"{folder.name}-{kind}.gguf"), kind],
                       check=True)
        first.unlink()  # intermediates go


class LlamaServer:
    """`llama-server` on one GGUF with `slots` parallel slots and continuous batching, on all cores, and `extra`
    flags (its speculation, for one)."""

    def __init__(self, tools: Path, model: Path, slots: int, context: int, log: Path, extra: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [str(tools / "llama-server"), "-m", str(model), "-np", str(slots), "-c", str(context), "-t",
             str(os.cpu_count()), "-cb", "--host", "127.0.0.1", "--port", str(self.port), *extra],
            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)

    def wait_until_ready(self, timeout: float = 600) -> float:
        """Seconds from start to a healthy server."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=5).status_code == 200:
                    return time.perf_counter() - self.started
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("llama-server did not start")
            time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


async def serve(url: str, prompts: list[RenderedPrompt], new_tokens: int, sampling: dict) -> dict:
    """All chats at once, each streaming `new_tokens` tokens (end-of-sequence ignored) or its natural length."""
    async def chat(client: httpx.AsyncClient, prompt: RenderedPrompt, arrival: float) -> Reply:
        times: list[float] = []
        body = {"prompt": prompt.token_ids, "n_predict": new_tokens, "stream": True, "cache_prompt": True, **sampling}
        async with client.stream("POST", f"{url}/completion", json=body) as response:
            if response.status_code != 200:
                raise RuntimeError(f"llama-server refused the request: {(await response.aread()).decode()}")
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    if json.loads(line[6:]).get("stop"):  # the closing chunk: timings, no token
                        break
                    times.append(time.perf_counter())  # one chunk per token
        return Reply(times[0] - arrival, times[-1] - arrival, len(times))

    async with httpx.AsyncClient(timeout=None) as client:
        arrival = time.perf_counter()
        replies = await asyncio.gather(*(chat(client, prompt, arrival) for prompt in prompts))
    return summarise(list(replies))
