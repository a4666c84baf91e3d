"""`python -m bench.knowledge [--models demo-1.5b demo-0.5b] [--temperatures default 0] [--half development]
[--baseline WORKTREE]`: does the tour guide tell the truth, in every language, and what does grounding cost?

Our own question set (`bench/knowledge_questions.toml`: questions on the guide in `knowledge/` in Chinese, in English
and mixed, in Traditional characters and written Cantonese, in Japanese and Korean, conversations of two and three
questions that switch sight and language, questions on the sample handbook in `bench/samples/`, and questions neither
covers), split by entry into a development half and a test half (`half`: work is tuned on the development half;
every figure is reported for each), measured three ways:
- retrieval alone: recall@k of the document each question is about, per kind of question, with jieba's words only
  and with character pairs added (the choice `retrieval.terms` makes), and the search time (the embedding model
  once evaluated beside them is in commit 0ddfcf9, `--embeddings`: docs/knowledge.md);
- at scale: a synthetic document of 10,000 passages (the guide's sentences, reshuffled) indexed beside the guide,
  its indexing time, the search time (p50/p95) and the index size;
- through the real app (`chainlit run app.py`, socket visitors, the handbook in `CHAT_KNOWLEDGE_DIR`), each model at
  each sampling asked for (`default`: what a visitor who changes nothing gets, the persona's), with the knowledge
  base on, and off at the defaults: answers right (every key phrase group present; a conversation's last), grounded
  answers naming the right source, uncovered questions whose reply says in words that the guide does not hold it
  (and those said or marked on the page as not checked), right answers the page flags as not in the sources, wrong
  answers it leaves unmarked, replies to Japanese and Korean questions in the visitor's language, and replies stating
  a figure that their cited document does not hold (and how many of those the page leaves unmarked). Then the cost of grounding, in an app whose replies all run to `COST_TOKENS`, on and off in turn
  on questions not asked before (a question asked again would find its prompt in vLLM's prefix cache and measure
  the cache): the first token of lone chats, and of `AT_ONCE` chats asked at the same moment, with their tokens per
  second in all; with `--baseline`, another commit's app measured the same way first, in the same run.
Writes docs/benchmark/knowledge.json and knowledge.md (about 30 minutes for both demo models at the two default
samplings on 2 AVX-512 cores; 36 with `--temperatures default 0 0.7`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from bench.knowledge_scoring import COVERED, GUIDE, HALVES, OUT, SAMPLES, half, halves, load_questions, parse, turns
from config.cantonese import as_the_model_reads
from config.settings import PROJECT_ROOT
from harness.app_process import AppProcess
from harness.visitor import ChatClient
from retrieval.grounding import search_for
from retrieval.index import KnowledgeIndex, documents_in
from retrieval.passages import MAX_CHARS, passages
from retrieval.reading import read_document

CONCURRENCY = 4  # chats at once through the app, for the answers
LONE_CHATS = 12  # questions asked one at a time, each way, for the first-token cost
AT_ONCE = 8  # chats asked at the same moment, each way, twice
COST_TOKENS = 64  # every reply's length where the cost of grounding is measured
SCALE_PASSAGES = 10_000


def recall(questions: dict[str, list[dict]], pairs: bool, folder: Path) -> dict:
    """Where the app's search (`grounding.search_for`: a conversation's last question, in the words the model reads)
    puts each question's document."""
    index = KnowledgeIndex(folder / f"recall-{pairs}.db", pairs=pairs)
    for documents in (GUIDE, SAMPLES):
        index.sync(documents)
    names = index.names([GUIDE, SAMPLES])
    figures = {}
    for kind in COVERED:
        ranks, seconds = [], []
        for question in questions[kind]:
            started = time.perf_counter()
            history = as_the_model_reads([{"role": "user", "content": text} for text in turns(question)])
            search = search_for(history, names, partial(index.holding, folders=[GUIDE, SAMPLES]))
            found = [passage.name for passage in index.search(search.text, [GUIDE, SAMPLES], 10, search.documents)]
            seconds.append(time.perf_counter() - started)
            ranks.append(found.index(question["source"]) + 1 if question["source"] in found else None)
        figures[kind] = {f"recall@{k}": round(sum(1 for rank in ranks if rank and rank <= k) / len(ranks), 3)
                         for k in (1, 3)} | {"search_ms_p50": round(1000 * statistics.median(seconds), 2)}
    return figures


def synthetic_document(path: Path, count: int) -> None:
    """A document of `count` passages: sections of the guide's sentences, reshuffled, each long enough (over half
    a passage) to be a passage of its own: a large operator document's shape."""
    sentences = [sentence for document in documents_in(GUIDE) for passage in passages(read_document(document))
                 for sentence in re.findall(r"[^。！？\n]+[。！？]", passage.text)]
    rng = random.Random(7)
    sections = []
    for number in range(1, count + 1):
        text = ""
        while len(text) <= MAX_CHARS // 2 + 20:
            text += rng.choice(sentences)
        sections.append(f"## 第 {number} 条\n\n{text[:MAX_CHARS - 20]}")
    path.write_text("# 大型文档示例\n\n" + "\n\n".join(sections), encoding="utf-8")


def scale(questions: list[str], folder: Path, count: int = SCALE_PASSAGES) -> dict:
    big = folder / "big"
    big.mkdir()
    synthetic_document(big / "大型文档.md", count)
    index = KnowledgeIndex(folder / "scale.db")
    index.sync(GUIDE)
    report = index.sync(big)
    seconds = []
    for question in questions:
        started = time.perf_counter()
        index.search(question, [GUIDE, big], 4)
        seconds.append(time.perf_counter() - started)
    seconds.sort()
    return {"passages": report.passages, "index_seconds": round(report.seconds, 1),
            "index_mib": round(index.path.stat().st_size / 2**20, 1),
            "search_ms_p50": round(1000 * statistics.median(seconds), 1),
            "search_ms_p95": round(1000 * seconds[int(0.95 * (len(seconds) - 1))], 1)}


async def ask(url: str, questions: list[str], knowledge: bool, temperature: float | None) -> dict:
    """The reply to the last of `questions`, asked one after another in one chat, and its timing."""
    client = ChatClient(url)
    await client.connect()
    options = {"knowledge": knowledge} | ({} if temperature is None else {"temperature": temperature})
    await client.socket.emit("chat_settings_change", options)
    await asyncio.sleep(0.2)  # the settings change lands before the question
    for question in questions[:-1]:
        await client.ask_and_wait(question, timeout=600)
    client.token_times.clear()
    asked = time.perf_counter()
    await client.ask_and_wait(questions[-1], timeout=600)
    answered = time.perf_counter()
    reply = client.latest_reply()
    await client.socket.disconnect()
    times = client.token_times or [answered]  # a reply the app gave without the model streams no token
    return {"question": questions[-1], "before": questions[:-1], **parse(reply), "asked": asked,
            "last_token": times[-1], "first_token_s": round(times[0] - asked, 3), "tokens": client.generated_tokens,
            "tokens_per_s": client.footer.get("tokens_per_s")}


async def answers(url: str, questions: list[list[str]], knowledge: bool, temperature: float | None,
                  at_once: int = CONCURRENCY) -> list[dict]:
    """Each chat's last reply (a chat: its questions in order), `at_once` chats at a time."""
    limit = asyncio.Semaphore(at_once)

    async def one(question: list[str]) -> dict:
        async with limit:
            return await ask(url, question, knowledge, temperature)

    return await asyncio.gather(*(one(question) for question in questions))


def grounding_cost(url: str, questions: list[str]) -> dict:
    """First tokens with the knowledge base on and off, in turn, each on questions not asked before: lone chats,
    then rounds of `AT_ONCE` chats asked together (their tokens per second in all: tokens over the round's time)."""
    unasked = iter(questions)
    lone = [next(unasked) for _ in range(LONE_CHATS)]
    figures: dict[str, dict] = {"on": {"lone": [], "rounds": []}, "off": {"lone": [], "rounds": []}}
    for question in lone:
        for mode in ("on", "off"):
            figures[mode]["lone"].append(asyncio.run(ask(url, [question], mode == "on", None))["first_token_s"])
    for _ in range(2):
        for mode in ("on", "off"):
            batch = [[next(unasked)] for _ in range(AT_ONCE)]
            replies = asyncio.run(answers(url, batch, mode == "on", None, AT_ONCE))
            span = max(reply["last_token"] for reply in replies) - min(reply["asked"] for reply in replies)
            figures[mode]["rounds"].append({"first_token_s": [reply["first_token_s"] for reply in replies],
                                            "tokens_per_s": sum(reply["tokens"] for reply in replies) / span})
    return {mode: {"lone_first_token_s_median": round(statistics.median(data["lone"]), 3),
                   f"first_token_s_median_{AT_ONCE}_at_once": round(statistics.median(
                       value for round_ in data["rounds"] for value in round_["first_token_s"]), 3),
                   f"tokens_per_s_{AT_ONCE}_at_once": round(statistics.mean(
                       round_["tokens_per_s"] for round_ in data["rounds"]), 1), "raw": data}
            for mode, data in figures.items()}


def through_the_app(model: str, questions: dict[str, list[dict]], temperatures: list[float | None],
                    only: str | None = None, baseline: Path | None = None) -> dict:
    every = [item for kind in (*COVERED, "uncovered") for item in questions[kind]]
    # Timing questions: all the guide's (also with --quick), reworded so that no answer pass has asked them before.
    timing = [f"{item['question']}（请简单回答）" for item in load_questions()["guide"][::-1]]
    with tempfile.TemporaryDirectory() as scratch:
        operators = Path(scratch) / "operators"
        operators.mkdir()
        for sample in SAMPLES.iterdir():
            (operators / sample.name).write_bytes(sample.read_bytes())
        result = {}
        # Every reply of the same length, on and off (a grounded answer is shorter: tokens per second over a round
        # would then measure the answers' length, not the cost of the passages).
        # With `baseline` (another commit's worktree), its cost first, on the same questions, in the same run.
        for name, project in [("grounding_cost_baseline", baseline), ("grounding_cost", PROJECT_ROOT)]:
            if only == "knowledge" or project is None:
                continue
            with AppProcess(model, Path(scratch) / f"{name}.log", project, CHAT_MAX_NEW_TOKENS=str(COST_TOKENS),
                            CHAT_IGNORE_EOS="true", CHAT_KNOWLEDGE_DIR=str(operators)) as app:
                app.wait_until_ready()
                result[name] = grounding_cost(app.url, timing)
        if only == "cost":
            return result
        runs = [(True, temperature) for temperature in temperatures] + ([] if only else [(False, None)])
        with AppProcess(model, Path(scratch) / "app.log", CHAT_MAX_NEW_TOKENS="160",
                        CHAT_KNOWLEDGE_DIR=str(operators)) as app:
            app.wait_until_ready()
            for knowledge, temperature in runs:
                replies = asyncio.run(answers(app.url, [turns(item) for item in every], knowledge, temperature))
                name = f"{'on' if knowledge else 'off'}, {'defaults' if temperature is None else f't={temperature:g}'}"
                result[name] = halves(questions, replies) | {"replies": replies}
    return result


def table(results: dict) -> str:
    def shown(value: float | None) -> str:
        return "–" if value is None else f"{value:.0%}"

    kinds = " | ".join(f"{kind} right" for kind in COVERED)
    lines = [f"| model | knowledge base, sampling | half | {kinds} | source named (guide / handbook) | uncovered: "
             "said in words, or marked | right but flagged | wrong, unmarked | ja/ko replies in their language | "
             "figure not in its cited document (unmarked) |", "|---" * (10 + len(COVERED)) + "|"]
    for model, runs in results["models"].items():
        for mode, run in runs.items():
            if mode.startswith("grounding_cost"):
                continue
            for part in HALVES:
                figures = run[part]
                if not any(value is not None for value in figures.values()):
                    continue  # a run of the other half only
                rights = " | ".join(shown(figures[f"{kind}_right"]) for kind in COVERED)
                lines.append(
                    f"| {model} | {mode} | {part} | {rights} | {shown(figures['guide_source_named'])} / "
                    f"{shown(figures['handbook_source_named'])} | {shown(figures['uncovered_said'])}, "
                    f"{shown(figures['uncovered_said_or_marked'])} | {shown(figures['right_flagged'])} | "
                    f"{shown(figures['wrong_unmarked'])} | {shown(figures['visitors_in_their_language'])} | "
                    f"{shown(figures['figure_outside_source'])} ({shown(figures['figure_outside_source_unmarked'])}) |")
    cost = ["| model | knowledge base | lone chat: first token | "
            f"{AT_ONCE} at once: first token (median) | {AT_ONCE} at once: tokens/s in all |", "|---|---|---|---|---|"]
    for model, runs in results["models"].items():
        for mode, figures in [(f"{mode}{checkout}", figures) for checkout, key in [(" (baseline)", "grounding_cost_baseline"),
                                                                               ("", "grounding_cost")]
                              for mode, figures in runs.get(key, {}).items()]:
            cost.append(f"| {model} | {mode} | {figures['lone_first_token_s_median']:.2f} s | "
                        f"{figures[f'first_token_s_median_{AT_ONCE}_at_once']:.2f} s | "
                        f"{figures[f'tokens_per_s_{AT_ONCE}_at_once']} |")
    recall_rows = [f"| {name} | " + " | ".join(f"{figures[kind]['recall@1']:.0%} / {figures[kind]['recall@3']:.0%}"
                                                for kind in COVERED) + f" | {figures['guide']['search_ms_p50']} ms |"
                   for name, figures in results["recall"].items()]
    big = results["scale"]
    return "\n".join([
        "Answers (through the app; right = every key phrase group present, a conversation's last reply; `defaults` = "
        "what a visitor who changes nothing gets; each half of the questions on a row of its own):", "", *lines, "", "The cost of grounding (the app's default sampling, questions not asked "
        "before):", "", *cost, "",
        "Retrieval alone, the document each question is about among the passages found (recall@1 / recall@3):", "",
        "| terms | " + " | ".join(COVERED) + " | search p50 |", "|---" * (len(COVERED) + 2) + "|", *recall_rows, "",
        f"At scale: {big['passages']:,} passages indexed in {big['index_seconds']} s ({big['index_mib']} MiB); "
        f"search p50 {big['search_ms_p50']} ms, p95 {big['search_ms_p95']} ms.", ""])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.knowledge", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=["demo-1.5b", "demo-0.5b"])
    parser.add_argument("--temperatures", nargs="*", default=["default", "0"],
                        help="samplings to answer at with the knowledge base on: 'default' (the persona's) or a number")
    parser.add_argument("--quick", action="store_true", help="a fifth of the questions, for a try")
    parser.add_argument("--half", choices=HALVES, help="only this half's questions (tune on the development half)")
    parser.add_argument("--only", choices=("knowledge", "cost"), help="only the answers with the knowledge base on "
                        "(no 'off' run, no cost of grounding), or only the cost: for a try while tuning")
    parser.add_argument("--baseline", type=Path, help="another commit's worktree: its cost of grounding too, measured "
                        "in the same run on the same questions (git worktree add /tmp/base COMMIT)")
    parser.add_argument("--out", type=Path, default=OUT / "knowledge.json", help="the JSON file (the table beside it)")
    parser.add_argument("--rescore", action="store_true", help="score the replies stored in --out again (after a change "
                        "to the scoring, on the same questions), asking nothing")
    arguments = parser.parse_args()
    questions = load_questions()
    if arguments.half:
        questions = {kind: [item for item in items if half(item) == arguments.half] for kind, items in questions.items()}
    if arguments.quick:
        questions = {kind: items[::5] for kind, items in questions.items()}
    temperatures = [None if value == "default" else float(value) for value in arguments.temperatures]
    if arguments.rescore:
        results = json.loads(arguments.out.read_text(encoding="utf-8"))
        for runs in results["models"].values():
            for mode, run in runs.items():
                if not mode.startswith("grounding_cost"):
                    run |= halves(questions, run["replies"])
        arguments.out.write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")
        arguments.out.with_suffix(".md").write_text(table(results), encoding="utf-8")
        print(table(results))
        return
    with tempfile.TemporaryDirectory() as scratch:
        results = {"questions": {kind: len(items) for kind, items in questions.items()},
                   "recall": {"words": recall(questions, False, Path(scratch)),
                              "words + character pairs": recall(questions, True, Path(scratch))}}
        results["scale"] = scale([turns(item)[-1] for kind in COVERED for item in questions[kind]], Path(scratch))
    print(json.dumps(results, ensure_ascii=False, indent=1))
    results["models"] = {model: through_the_app(model, questions, temperatures, arguments.only, arguments.baseline)
                         for model in arguments.models}
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")
    arguments.out.with_suffix(".md").write_text(table(results), encoding="utf-8")
    print(table(results))


if __name__ == "__main__":
    main()
