"""`python -m bench.remote`: the app in front of two vLLM servers on this machine against the app with its
own in-process engine, eight chats at once through the app's socket, in one run.

Both serve the demo model with the app's default sampling, `--tokens` tokens per reply (end-of-sequence
ignored), every question new; the two servers (`python -m vllm.entrypoints.openai.api_server`, in the dtype
the app's engine picks) are bound to half of this machine's cores each and stay up while the two apps take
turns, `--repeats` times; medians. Both sides use the same cores, so the ratio shows what the HTTP path and
two engines sharing the cores cost, not what more machines would gain. Writes `docs/benchmark/remote.json`.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import psutil

from bench.workload import DEMO, stage_parser
from config.settings import load_settings
from harness.app_process import AppProcess
from harness.questions import questions
from harness.visitor import serve
from harness.vllm_server import VllmServer
from modelprep.source import resolve_model

CHATS = 8


def one_run(model: Path, tag: str, tokens: int, log: Path, **env: str) -> dict:
    app = AppProcess(model, log, CHAT_MAX_NEW_TOKENS=str(tokens), CHAT_IGNORE_EOS="true", **env)
    try:
        app.ready_after(time.perf_counter())
        run = asyncio.run(serve(app.url, questions(tag, CHATS)))
        return {"tokens_per_s": round(run["aggregate_tokens_per_s"], 1), "ttft_p50_s": round(run["ttft_p50_s"], 2)}
    finally:
        app.stop()


def main() -> None:
    arguments = stage_parser("remote", __doc__, tokens=128, repeats=3).parse_args()
    settings = load_settings()
    model = resolve_model(DEMO, settings.cache_dir, prepare=False, weights=settings.weights)
    half = psutil.cpu_count() // 2
    cores = [f"{first}-{first + half - 1}" if half > 1 else str(first) for first in (0, half)]
    with tempfile.TemporaryDirectory() as scratch:
        servers = [VllmServer(model, Path(scratch) / f"server-{index}.log", settings.max_model_len,
                              cores=cores[index]) for index in range(2)]
        try:
            for server in servers:
                server.start()
            for server in servers:
                server.wait_until_ready()
            sides = {"in_process": {}, "two_servers": {"CHAT_ENGINE_URLS": ",".join(s.url for s in servers)}}
            runs: dict[str, list[dict]] = {side: [] for side in sides}
            for repeat in range(arguments.repeats):
                for side, env in sides.items():
                    print(f"==> {side}, run {repeat + 1} of {arguments.repeats}", flush=True)
                    runs[side].append(one_run(model, f"remote-{side}-{repeat}", arguments.tokens,
                                              Path(scratch) / f"{side}-{repeat}.log", **env))
        finally:
            for server in servers:
                server.stop()
    medians = {side: {key: statistics.median(run[key] for run in side_runs) for key in side_runs[0]}
               for side, side_runs in runs.items()}
    result = {"model": model.name, "chats": CHATS, "new_tokens": arguments.tokens, "repeats": arguments.repeats,
              "cpu_cores": psutil.cpu_count(), "median": medians, "runs": runs,
              "two_servers_over_in_process": round(medians["two_servers"]["tokens_per_s"]
                                                   / medians["in_process"]["tokens_per_s"], 2)}
    arguments.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({key: result[key] for key in ("median", "two_servers_over_in_process")}, indent=1))


if __name__ == "__main__":
    main()
