"""`python -m bench.versus`: this app against llama.cpp's own server, the alternative a client site would pick.

`llama-server` (built once by `bench.llama_server`) runs with 8 parallel slots and continuous batching on
all cores, on the demo's Q4_K_M file and on a Q8_0 made from the same 16-bit folder with llama.cpp's own
converter; the app runs with its defaults through its sockets (Chainlit's browser protocol, the sidebar on).
Each system in turn, on 1 and on 8 chats at once, `--tokens` new tokens per reply (greedy, end-of-sequence
ignored). Every request asks a question no earlier one asked (a visitor number in front of one of the eight
tour-guide questions), so only the persona's system prompt can come from a prefix cache; the first request
of each system, on a cold cache, is reported on its own. Then the "real replies" workload: the eight tour-guide
questions at once (new to the engine, as above) with the app's default sampling (temperature, top-p, top-k
and repetition penalty, over the whole reply for both; llama-server's min-p off) and natural lengths, up to
the app's reply budget. `--weights int8 int4` runs the app in each format in turn, in the same run. Writes
`docs/benchmark/versus.json` and its table `versus.md` (or `--out`).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import psutil
from transformers import AutoTokenizer

from bench import llama_server
from bench.workload import DEMO, stage_parser
from config.settings import Settings, load_settings
from engine.prompt import render_prompt
from harness.app_process import AppProcess
from harness.questions import questions, system_prompt
from harness.visitor import serve as serve_app
from modelprep.demo import DEMOS
from modelprep.quantization.checkpoint import weight_format
from modelprep.source import resolve_model
from telemetry.memory import tree_pss

CHATS = (1, 8)
SLOTS = 8
CONTEXT = 16384  # llama-server splits it between its slots: 2,048 tokens each
GREEDY = {"temperature": 0, "ignore_eos": True}


def llama_sampling(settings: Settings) -> dict:
    """The app's default sampling in llama-server's terms: its repetition penalty over a slot's whole context,
    as vLLM's over the whole sequence, and no min-p, which llama-server applies by default and vLLM does not."""
    temperature, top_p = settings.sampling_defaults()
    return {"temperature": temperature, "top_p": top_p, "top_k": settings.top_k,
            "repeat_penalty": settings.repetition_penalty, "repeat_last_n": CONTEXT // SLOTS, "min_p": 0}


def real_replies(runs: list[dict]) -> dict:
    """Of repeated runs of the real-replies workload: medians of the rate, first token and the time until the
    last reply ended, and every reply's length."""
    return {"tokens_per_s": round(statistics.median(run["aggregate_tokens_per_s"] for run in runs), 1),
            "first_token_p50_s": round(statistics.median(run["ttft_p50_s"] for run in runs), 2),
            "all_done_s": round(statistics.median(max(reply["last_token"] for reply in run["replies"])
                                                  for run in runs), 1),
            "reply_tokens": [[reply["tokens"] for reply in run["replies"]] for run in runs]}


def run_app_real(model: Path, repeats: int, log: Path, ready_timeout: float = 180) -> dict:
    """The app with every default, the real-replies workload."""
    app = AppProcess(model, log)
    try:
        app.wait_until_ready(ready_timeout)
        return real_replies([asyncio.run(serve_app(app.url, questions(f"real{repeat}", 8)))
                             for repeat in range(repeats)])
    finally:
        app.stop()


def run_app(model: Path, tokens: int, repeats: int, log: Path, ready_timeout: float = 180, label: str = "") -> dict:
    started = time.perf_counter()
    app = AppProcess(model, log, CHAT_TEMPERATURE="0", CHAT_REPETITION_PENALTY="1", CHAT_MAX_NEW_TOKENS=str(tokens),
                     CHAT_IGNORE_EOS="true")
    try:
        app.wait_until_ready(ready_timeout)
        ready = time.perf_counter() - started
        cold = asyncio.run(serve_app(app.url, questions("cold", 1)))
        runs = {chats: [asyncio.run(serve_app(app.url, questions(f"{repeat}", chats)))
                        for repeat in range(repeats)] for chats in CHATS}
        return _result(f"this app{label} (its defaults, through its sockets)", ready, cold, runs,
                       tree_pss(app.process.pid))
    finally:
        app.stop()


def run_llama_server(tools: Path, gguf: Path, label: str, tokenizer, tokens: int, repeats: int, log: Path,
                     real_sampling: Settings | None = None) -> dict:
    """The fixed workload on 1 and 8 chats, and the real-replies one with the app's `real_sampling` if given."""
    def rendered(texts: list[str]):
        return [render_prompt(tokenizer, system_prompt(), [{"role": "user", "content": text}], budget=1024)
                for text in texts]

    server = llama_server.LlamaServer(tools, gguf, SLOTS, CONTEXT, log)
    try:
        ready = server.wait_until_ready()
        cold = asyncio.run(llama_server.serve(server.url, rendered(questions("cold", 1)), tokens, GREEDY))
        runs = {chats: [asyncio.run(llama_server.serve(server.url, rendered(questions(f"{repeat}", chats)), tokens,
                                                       GREEDY)) for repeat in range(repeats)] for chats in CHATS}
        result = _result(label, ready, cold, runs, psutil.Process(server.process.pid).memory_full_info().pss)
        if real_sampling:
            result["real_replies"] = real_replies([asyncio.run(llama_server.serve(
                server.url, rendered(questions(f"real{repeat}", 8)), real_sampling.max_new_tokens,
                llama_sampling(real_sampling))) for repeat in range(repeats)])
        return result
    finally:
        server.stop()


def _result(label: str, ready: float, cold: dict, runs: dict[int, list[dict]], memory: int) -> dict:
    return {"system": label, "ready_s": round(ready, 1), "memory_pss_gib": round(memory / 1024**3, 2),
            "cold_first_token_s": round(cold["ttft_p50_s"], 2),
            "chats": {chats: {"tokens_per_s": round(statistics.median(run["aggregate_tokens_per_s"] for run in rs), 1),
                              "first_token_p50_s": round(statistics.median(run["ttft_p50_s"] for run in rs), 2),
                              "repeats_tokens_per_s": [round(run["aggregate_tokens_per_s"], 1) for run in rs]}
                      for chats, rs in runs.items()}}


def run_llama_servers(tools: Path, ggufs: dict[str, Path], tokenizer, tokens: int, repeats: int,
                      scratch: Path, real_sampling: Settings | None = None) -> list[dict]:
    """`llama-server` on each GGUF (by quantisation kind), one after another."""
    return [run_llama_server(tools, path, f"llama-server, {SLOTS} slots, {kind}", tokenizer, tokens, repeats,
                             scratch / f"llama-{kind}.log", real_sampling) for kind, path in ggufs.items()]


def write(result: dict, out: Path) -> None:
    """The result as JSON in `out` and as a table beside it (`.md`), printed too."""
    out.write_text(json.dumps(result, indent=1) + "\n")
    out.with_suffix(".md").write_text(table(result))
    print(table(result))


def table(result: dict) -> str:
    lines = ["| system | 1 chat tok/s | 8 chats tok/s | first token p50 at 8 | first token, cold | memory (PSS) | ready after |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for system in result["systems"]:
        one, eight = system["chats"][1], system["chats"][8]
        lines.append(f"| {system['system']} | {one['tokens_per_s']} | {eight['tokens_per_s']} | "
                     f"{eight['first_token_p50_s']} s | {system['cold_first_token_s']} s | "
                     f"{system['memory_pss_gib']} GiB | {system['ready_s']} s |")
    if all("real_replies" in system for system in result["systems"]):
        lines += ["", "Real replies: the eight tour-guide questions at once, default sampling, natural lengths.", "",
                  "| system | tok/s, all 8 | first token p50 | all replies done | mean reply length |",
                  "|---|---:|---:|---:|---:|"]
        for system in result["systems"]:
            real = system["real_replies"]
            lengths = [tokens for run in real["reply_tokens"] for tokens in run]
            lines.append(f"| {system['system']} | {real['tokens_per_s']} | {real['first_token_p50_s']} s | "
                         f"{real['all_done_s']} s | {round(statistics.fmean(lengths))} tokens |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = stage_parser("versus", __doc__, tokens=128, repeats=3)
    parser.add_argument("--weights", nargs="+", choices=("auto", "int8", "int4", "original"),
                        help="the app in each of these weight formats, one after another (default: CHAT_WEIGHTS)")
    arguments = parser.parse_args()
    settings = load_settings()
    folder = resolve_model(DEMO, settings.cache_dir, prepare=False, weights="original")
    formats = arguments.weights or [settings.weights]
    served = {weights: resolve_model(DEMO, settings.cache_dir, prepare=False, weights=weights) for weights in formats}
    tools = llama_server.build(settings.cache_dir)
    ggufs = {"Q4_K_M": settings.cache_dir / "demo" / f"{DEMOS[DEMO].name}.gguf",
             "Q8_0": llama_server.gguf(tools, folder, "Q8_0", settings.cache_dir)}
    tokenizer = AutoTokenizer.from_pretrained(folder)
    with tempfile.TemporaryDirectory() as scratch:
        systems = run_llama_servers(tools, ggufs, tokenizer, arguments.tokens, arguments.repeats, Path(scratch),
                                    settings)
        for model in served.values():
            label = f", {weight_format(model)} weights" if len(served) > 1 else ""
            systems.append({**run_app(model, arguments.tokens, arguments.repeats, Path(scratch) / "app.log",
                                      label=label),
                            "real_replies": run_app_real(model, arguments.repeats, Path(scratch) / "app-real.log")})
    write({"model": folder.name, "weights": formats, "new_tokens": arguments.tokens, "repeats": arguments.repeats,
           "cpu_cores": psutil.cpu_count(), "systems": systems}, arguments.out)


if __name__ == "__main__":
    main()
