"""`python -m bench.then_now`: this app against itself as it was at a baseline commit, in one run: start-up,
memory and speed with the app's default sampling.

The baseline is checked out into a git worktree (`--baseline`, default `BASELINE`: main before the engine
ran the model in its engine-core process and the sampler stopped sorting the vocabulary) and both run on
the same installed packages, demo model and cache, alternating, `--repeats` times. Each run, with the plain
assistant persona: `chainlit run app.py` is started and timed until `/healthz` says ready and until the first token
of a first question reaches a socket client (the model's files are in the page cache: a warm start); the PSS of each
of the app's processes is read once ready; then one chat and eight at once, with the app's default sampling
(temperature, top-p, top-k, repetition penalty), `--tokens` tokens each (end-of-sequence ignored), every
question new to the app. Writes `docs/benchmark/then_now.json` (or `--out`).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from bench.workload import DEMO, stage_parser
from config.settings import PROJECT_ROOT, load_settings
from harness.app_process import AppProcess
from harness.questions import questions
from harness.visitor import serve
from modelprep.source import resolve_model

BASELINE = "6b544c6"
CHATS = (1, 8)


def one_run(project: Path, model: Path, tag: str, tokens: int, log: Path) -> dict:
    started = time.perf_counter()
    # The plain assistant: the guide says itself, without the model, that its documents do not answer some of the
    # workload's questions (since 2026-12-05), and such a reply has no tokens to time.
    app = AppProcess(model, log, project=project, CHAT_MAX_NEW_TOKENS=str(tokens), CHAT_IGNORE_EOS="true",
                     CHAT_PERSONA="assistant")
    try:
        ready = app.ready_after(started)
        first = asyncio.run(serve(app.url, questions(f"{tag}-first", 1)))
        processes = [psutil.Process(app.process.pid), *psutil.Process(app.process.pid).children(recursive=True)]
        memory = {f"{process.name()} ({process.pid})": round(process.memory_full_info().pss / 1024**3, 2)
                  for process in processes}
        rates = {chats: asyncio.run(serve(app.url, questions(f"{tag}-{chats}", chats)))
                 for chats in CHATS}
        return {"ready_s": round(ready, 1), "first_token_after_start_s": round(ready + first["ttft_p50_s"], 1),
                "memory_pss_gib": round(sum(memory.values()), 2), "memory_by_process_gib": memory,
                **{f"{chats}_chats_tokens_per_s": round(run["aggregate_tokens_per_s"], 1) for chats, run in rates.items()},
                "8_chats_first_token_p50_s": round(rates[8]["ttft_p50_s"], 2)}
    finally:
        app.stop()


def summary(runs: list[dict]) -> dict:
    keys = [key for key, value in runs[0].items() if isinstance(value, float)]
    return {"median": {key: round(statistics.median(run[key] for run in runs), 2) for key in keys}, "runs": runs}


def main() -> None:
    parser = stage_parser("then_now", __doc__, tokens=128, repeats=3)
    parser.add_argument("--baseline", default=BASELINE, help="the commit to compare with")
    arguments = parser.parse_args()
    settings = load_settings()
    model = resolve_model(DEMO, settings.cache_dir, prepare=False, weights=settings.weights)
    with tempfile.TemporaryDirectory() as scratch:
        worktree = Path(scratch) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", str(worktree), arguments.baseline], cwd=PROJECT_ROOT,
                       check=True, capture_output=True)
        try:
            projects = {"then": worktree, "now": PROJECT_ROOT}
            runs: dict[str, list[dict]] = {"then": [], "now": []}
            for repeat in range(arguments.repeats):
                for side, project in projects.items():
                    print(f"==> {side}, run {repeat + 1} of {arguments.repeats}", flush=True)
                    runs[side].append(one_run(project, model, f"{side}{repeat}", arguments.tokens,
                                              Path(scratch) / f"{side}-{repeat}.log"))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=PROJECT_ROOT, check=True)
    then, now = summary(runs["then"]), summary(runs["now"])
    result = {"baseline": subprocess.run(["git", "rev-parse", arguments.baseline], cwd=PROJECT_ROOT, text=True,
                                         capture_output=True, check=True).stdout.strip(),
              "model": model.name, "new_tokens": arguments.tokens, "repeats": arguments.repeats,
              "cpu_cores": psutil.cpu_count(), "then": then, "now": now,
              "now_over_then": {key: round(now["median"][key] / then["median"][key], 2) for key in now["median"]}}
    arguments.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({key: result[key] for key in ("now_over_then",)}, indent=1))
    print(json.dumps({"then": then["median"], "now": now["median"]}, indent=1))


if __name__ == "__main__":
    main()
