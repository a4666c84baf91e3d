"""`python -m bench.studies.demos`: the two bundled demo models side by side, to choose the one a demo audience sees.

Each model in the weights the app serves it in on this CPU (`CHAT_WEIGHTS=auto`), each measurement in a fresh
process: perplexity on `bench/heldout.txt` and greedy answers to the tour guide's questions (`bench.studies.quality`'s
measurement), and this app's engine writing 128 tokens for one chat and for 8 at once (`bench.engine_runs`,
`--repeats` runs, the median kept). Writes `docs/benchmark/demos.json` and `demos.md`. The set-up prepares both
models (`./test.sh`; or `python -m modelprep --demo demo-1.5b`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.isolate import run_isolated
from bench.studies.quality import QUESTIONS, perplexity
from config.settings import PROJECT_ROOT, load_settings
from modelprep.demo import DEMOS
from modelprep.source import resolve_model

CHATS = [1, 8]


def measure(name: str, repeats: int) -> dict:
    settings = load_settings()
    folder = resolve_model(name, settings.cache_dir, prepare=False, weights=settings.weights)
    print(f"==> {name}: perplexity and answers, then 1 and 8 chats", flush=True)
    quality = run_isolated("bench.studies.quality:score", model=str(folder), quick=False)
    speed = run_isolated("bench.engine_runs:run", model=str(folder), concurrency=CHATS, repeats=repeats)
    every = [value for values in quality["logprobs"].values() for value in values]
    return {"folder": folder.name, "weights": speed["weights"], "memory_gib": round(speed["memory_bytes"] / 1024**3, 2),
            "perplexity": round(perplexity(every), 3),
            **{f"perplexity_{language}": round(perplexity(values), 3) for language, values in quality["logprobs"].items()},
            **{f"{run['users']}_chats_tokens_per_s": round(run["aggregate_tokens_per_s"], 1) for run in speed["runs"]},
            "answers": quality["answers"]}


def markdown(results: dict[str, dict]) -> str:
    names = list(results)
    lines = ["| | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for key, label in (("weights", "weights"), ("perplexity_zh", "perplexity, Chinese (lower is better)"),
                       ("perplexity_en", "perplexity, English"), ("1_chats_tokens_per_s", "1 chat, tokens/s"),
                       ("8_chats_tokens_per_s", "8 chats, tokens/s in all"), ("memory_gib", "engine memory (PSS), GiB")):
        lines.append(f"| {label} | " + " | ".join(str(results[name][key]) for name in names) + " |")
    lines += ["", "Greedy answers (tour guide's system prompt, 200 tokens at most):", "",
              "| Question | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for index, question in enumerate(QUESTIONS):
        cells = [question, *(results[name]["answers"][index] for name in names)]
        lines.append("| " + " | ".join(cell.replace("\n", "<br>").replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.demos", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "benchmark" / "demos.json")
    arguments = parser.parse_args()
    results = {name: measure(name, arguments.repeats) for name in DEMOS}
    arguments.out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    text = markdown(results)
    arguments.out.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
