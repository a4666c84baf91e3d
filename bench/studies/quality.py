"""`python -m bench.studies.quality [--quick] [--int4 FOLDER]`: what int8 (and 4-bit) weights cost in quality, measured by the engine itself.

Perplexity of each model on `bench/heldout.txt` (Chinese and English prose written for this project,
never seen in training), from the log-probabilities vLLM gives every token of a prompt, in windows of
1,024 tokens; and the greedy answers of both models to a fixed set of questions, side by side. Each model
runs in its own process with the app's engine settings. Writes quality.json and quality.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

from bench.isolate import run_isolated
from bench.models import model_pair
from config.settings import PROJECT_ROOT, load_settings

TEXT = Path(__file__).parent.parent / "heldout.txt"  # bench/heldout.txt
ENGLISH_STARTS = "The morning ferry"
WINDOW = 1024
QUESTIONS = [
    "推荐三个广州的景点，并说明理由。",
    "广州早茶有哪些必点的点心？",
    "带孩子在广州玩一天，怎么安排比较好？",
    "What is the best way to spend one day in Guangzhou?",
    "Which Cantonese dim sum should a first-time visitor try?",
]


def held_out_texts(quick: bool) -> dict[str, str]:
    text = TEXT.read_text(encoding="utf-8")
    chinese, english = text.split(ENGLISH_STARTS, 1)
    texts = {"zh": chinese.strip(), "en": ENGLISH_STARTS + english}
    return {language: part[:600] if quick else part for language, part in texts.items()}


def score(model: str, quick: bool) -> dict:
    """In a fresh process: every held-out token's log-probability, and the greedy answers."""
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from engine.prompt import render_prompt
    from engine.vllm_engine import engine_options
    from harness.questions import system_prompt

    settings = load_settings()
    tokenizer = AutoTokenizer.from_pretrained(model)
    llm = LLM(**engine_options(settings, Path(model)))
    logprobs = {}
    for language, text in held_out_texts(quick).items():
        ids = tokenizer(text).input_ids
        windows = [TokensPrompt(prompt_token_ids=ids[start:start + WINDOW]) for start in range(0, len(ids), WINDOW)]
        outputs = llm.generate(windows, SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False)
        logprobs[language] = [entry[token].logprob for window, output in zip(windows, outputs)
                              for token, entry in zip(window["prompt_token_ids"][1:], output.prompt_logprobs[1:])]
    questions = QUESTIONS[:2] if quick else QUESTIONS
    prompts = [TokensPrompt(prompt_token_ids=render_prompt(tokenizer, system_prompt(), [{"role": "user", "content": q}],
                                                           budget=settings.max_model_len - 256).token_ids)
               for q in questions]
    answers = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=32 if quick else 200), use_tqdm=False)
    return {"logprobs": logprobs, "answers": [answer.outputs[0].text for answer in answers]}


def perplexity(logprobs: list[float]) -> float:
    return math.exp(-sum(logprobs) / len(logprobs))


def report(runs: dict[str, dict], questions: list[str]) -> dict:
    """Perplexity of each run ("original" and the quantised ones), and how far each quantised one is from it."""
    languages = list(runs["original"]["logprobs"])
    every = {name: [value for language in languages for value in run["logprobs"][language]]
             for name, run in runs.items()}
    result = {"tokens": {language: len(runs["original"]["logprobs"][language]) for language in languages}}
    for name, run in runs.items():
        result[name] = {"perplexity": perplexity(every[name]),
                        **{f"perplexity_{language}": perplexity(run["logprobs"][language]) for language in languages}}
    for name in [name for name in runs if name != "original"]:
        result[f"{name}_vs_original"] = result[name]["perplexity"] / result["original"]["perplexity"] - 1
        result[f"{name}_mean_abs_logprob_difference"] = sum(
            abs(a - b) for a, b in zip(every["original"], every[name])) / len(every["original"])
    result["answers"] = [{"question": question, **{name: run["answers"][index] for name, run in runs.items()}}
                         for index, question in enumerate(questions[:len(runs["original"]["answers"])])]
    return result


def markdown(result: dict, names: dict[str, str]) -> str:
    """`names`: each run's key and its label."""
    lines = [f"Perplexity on `bench/heldout.txt` ({result['tokens']['zh']} Chinese + {result['tokens']['en']} "
             f"English tokens), lower is better:", "",
             "| Weights | All | Chinese | English |", "|---|---:|---:|---:|"]
    for key, name in names.items():
        figures = result[key]
        lines.append(f"| {name} | {figures['perplexity']:.3f} | {figures['perplexity_zh']:.3f} | "
                     f"{figures['perplexity_en']:.3f} |")
    lines.append("")
    for key in [key for key in names if key != "original"]:
        lines.append(f"{key} against the original: {100 * result[f'{key}_vs_original']:+.2f} % perplexity; each "
                     f"token's log-probability moved by {result[f'{key}_mean_abs_logprob_difference']:.3f} on average.")
    lines += ["", "Greedy answers:", "", "| Question | " + " | ".join(names.values()) + " |",
              "|---|" + "---|" * len(names)]
    for answer in result["answers"]:
        cells = [answer["question"], *(answer[key] for key in names)]
        lines.append("| " + " | ".join(cell.replace("\n", "<br>").replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.quality", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="600 characters of each language, two short answers")
    parser.add_argument("--model", type=Path, help="16-bit model folder (default: the demo model)")
    parser.add_argument("--int8", type=Path, help="its int8 folder (default: the demo's, or quantised on the spot)")
    parser.add_argument("--int4", type=Path, help="its 4-bit folder too (`modelprep.quantization.int4`; default: none)")
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "benchmark", help="output folder")
    arguments = parser.parse_args(argv)
    scratch = tempfile.TemporaryDirectory()
    model, int8 = model_pair(arguments.model, arguments.int8, Path(scratch.name))
    folders = {"original": model, "int8": int8, **({"int4": arguments.int4} if arguments.int4 else {})}
    runs = {name: run_isolated("bench.studies.quality:score", model=str(folder), quick=arguments.quick)
            for name, folder in folders.items()}
    result = report(runs, QUESTIONS)
    arguments.out.mkdir(parents=True, exist_ok=True)
    (arguments.out / "quality.json").write_text(json.dumps(result, indent=1, ensure_ascii=False))
    text = markdown(result, {"original": f"{model.name} (16-bit)", **{name: name for name in folders if name != "original"}})
    (arguments.out / "quality.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
