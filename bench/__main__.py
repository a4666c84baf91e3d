"""`python -m bench [--quick] [--skip NAME ...]`: every system on the fixed workload, in one run on this machine.

Measures the memory bandwidth and the decode ceilings it implies, the transformers baseline, this app's
engine in bf16 and int8 (and int4 where the CPU runs it and the demo's copy is prepared) at 1, 2, 4 and 8 chats, the full UI path at 1 and 8 chats (with the weights the
app serves on this CPU), and llama.cpp when llama-cpp-python is installed; then writes results.json, chart.png and table.md. Each system runs in a
fresh process; this app's runs are repeated (5 times by default) and the median kept, the sequential
baselines (minutes long, and steady) run once. Then the other benchmarks (`STAGES`, each `python -m
bench.NAME` writing NAME.json beside them) unless skipped. `--quick` runs 1 and 2 chats once on the model
given and no other stage (the tests use their tiny model). Left out: the studies in `bench/studies/` (each answered
one question once, and takes a set-up or an hour of its own: `python -m bench.studies.NAME`).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from bench.bandwidth import bytes_per_token, read_bandwidth
from bench.isolate import run_isolated
from bench.models import model_pair
from bench.results import write_report
from bench.workload import CONCURRENCY, DEMO, NEW_TOKENS
from config.errors import ModelLoadError
from config.settings import PROJECT_ROOT, load_settings
from harness.app_process import AppProcess
from harness.figures import median_run
from harness.questions import questions
from harness.visitor import serve
from modelprep.demo import DEMOS
from modelprep.hardware import fast_int8, int4_kernel, resolve_dtype
from modelprep.source import resolve_model
from telemetry.memory import tree_pss

# The other benchmarks, in the order they run: the app against its baseline commit, a decode step's profile,
# a presenter's page, llama-server on the demo model, the 7B-shaped model (about 30 minutes alone), the app in
# front of two vLLM servers, what the teaching view's token probabilities and Compare cost, and the knowledge base.
STAGES = ("then_now", "profile", "presenter", "versus", "seven_b", "remote", "logprobs", "compare", "knowledge")


def machine(bandwidth: float) -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": psutil.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 1024**3, 1),
            "read_bandwidth_gb_s": round(bandwidth / 1e9, 1)}


def ui_runs(model: Path, concurrency: list[int], repeats: int, log: Path) -> dict:
    app = AppProcess(model, log, CHAT_TEMPERATURE="0", CHAT_REPETITION_PENALTY="1",
                     CHAT_MAX_NEW_TOKENS=str(NEW_TOKENS), CHAT_IGNORE_EOS="true")
    try:
        app.wait_until_ready()
        runs = [median_run([asyncio.run(serve(app.url, questions(f"{users}-{repeat}", users)))
                            for repeat in range(repeats)]) for users in concurrency]
        return {"memory_bytes": tree_pss(app.process.pid), "runs": runs}
    finally:
        app.stop()


def demo_int4(cache: Path) -> Path | None:
    """The demo model's 4-bit copy, if this CPU runs 4-bit weights and the set-up has made it."""
    try:
        return resolve_model(DEMO, cache, prepare=False, weights="int4") if int4_kernel() else None
    except ModelLoadError:
        print(f"==> int4 skipped: not prepared (CHAT_WEIGHTS=int4 .venv/bin/python -m modelprep --demo {DEMO})")
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 and 2 chats only (under two minutes on a tiny model)")
    parser.add_argument("--model", type=Path, help="16-bit model folder (default: the demo model)")
    parser.add_argument("--int8", type=Path, help="its int8 folder (default: the demo's, or quantised on the spot)")
    parser.add_argument("--int4", type=Path, help="its 4-bit folder (default: the demo's, where prepared and the CPU "
                                                  "runs 4-bit weights)")
    parser.add_argument("--gguf", type=Path, help="GGUF for llama.cpp (default: the demo's, if llama-cpp-python is "
                                                  "installed)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each N for this app (the median is kept)")
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "benchmark", help="output folder")
    parser.add_argument("--skip", nargs="+", choices=STAGES, default=[], help="other benchmarks not to run")
    arguments = parser.parse_args(argv)
    settings = load_settings()
    concurrency = [1, 2] if arguments.quick else list(CONCURRENCY)
    repeats = 1 if arguments.quick else arguments.repeats
    ui_concurrency = [1, 2] if arguments.quick else [1, 8]
    scratch = tempfile.TemporaryDirectory()
    model, int8 = model_pair(arguments.model, arguments.int8, Path(scratch.name))
    gguf = arguments.gguf or (None if arguments.model else settings.cache_dir / "demo" / f"{DEMOS[DEMO].name}.gguf")
    arguments.out.mkdir(parents=True, exist_ok=True)

    print("==> Memory bandwidth", flush=True)
    bandwidth = read_bandwidth()
    results = {"machine": machine(bandwidth), "model": model.name, "new_tokens": NEW_TOKENS, "quick": arguments.quick,
               "dtype": resolve_dtype(settings.dtype),
               "ceilings": {fmt: bandwidth / bytes_per_token(folder) for fmt, folder in
                            (("bf16", model), ("int8", int8))}, "systems": {}}
    systems = results["systems"]
    print("==> transformers generate, bf16, users one after another", flush=True)
    systems["transformers_bf16_sequential"] = run_isolated("bench.baseline:run", model=str(model),
                                                           users=max(concurrency))
    int4 = arguments.int4 or (None if arguments.model else demo_int4(settings.cache_dir))
    for fmt, folder in (("bf16", model), ("int8", int8), *((("int4", int4),) if int4 else ())):
        print(f"==> This app's engine, {fmt}, {concurrency} chats at once", flush=True)
        systems[f"engine_{fmt}"] = run_isolated("bench.engine_runs:run", model=str(folder), concurrency=concurrency,
                                                  repeats=repeats)
    # The weights the app serves here by default (CHAT_WEIGHTS=auto): the demo in int8 only where the CPU computes
    # int8 fast; a given model as given.
    results["served"] = "int8" if not arguments.model and fast_int8() else "bf16"
    print(f"==> The full UI path (Chainlit app, {results['served']}), {ui_concurrency} chats at once", flush=True)
    systems["ui"] = ui_runs(int8 if results["served"] == "int8" else model, ui_concurrency, repeats,
                            Path(scratch.name) / "app.log")
    if gguf and gguf.is_file() and importlib.util.find_spec("llama_cpp"):
        print("==> llama.cpp on the 4-bit GGUF, users one after another", flush=True)
        systems["llama_cpp_q4_sequential"] = run_isolated("bench.llama_ref:run", gguf=str(gguf),
                                                          tokenizer_folder=str(model), users=max(concurrency))
    else:
        print("==> llama.cpp skipped (llama-cpp-python is not installed, or no GGUF)", flush=True)
    write_report(results, arguments.out)
    print((arguments.out / "table.md").read_text())
    for stage in [] if arguments.quick else [stage for stage in STAGES if stage not in arguments.skip]:
        print(f"==> python -m bench.{stage}", flush=True)
        subprocess.run([sys.executable, "-m", f"bench.{stage}", "--out", str(arguments.out / f"{stage}.json")],
                       cwd=PROJECT_ROOT, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
