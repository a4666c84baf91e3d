"""`python -m bench.knowledge [--models demo-0.5b demo-1.5b] [--quick]`: does the tour guide tell the truth?

Our own question set (`bench/knowledge_questions.toml`: questions on the guide in `knowledge/`, on the sample
handbook in `bench/samples/`, and questions neither covers), measured three ways:
- retrieval alone: recall@k of the document each question is about, with jieba's words only and with character
  pairs added (the choice `retrieval.terms` makes), and the search time;
- at scale: a synthetic document of 10,000 passages (the guide's sentences, reshuffled) indexed beside the guide,
  its indexing time, the search time (p50/p95) and the index size;
- through the real app (`chainlit run app.py`, socket visitors, temperature 0, the handbook in
  `CHAT_KNOWLEDGE_DIR`), each model with the knowledge base on and off: answers right (every key phrase group
  present), grounded answers naming the right source, uncovered questions answered with an honest "not in the
  documents", and the first-token time of lone chats with and without the passages.
Writes docs/benchmark/knowledge.json and knowledge.md (about 12 minutes for both demo models on 2 AVX-512 cores).
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
import tomllib
from pathlib import Path

from config.settings import PROJECT_ROOT
from harness.app_process import AppProcess
from harness.visitor import ChatClient
from history.conversation import SOURCES_MARK
from retrieval.index import KnowledgeIndex, documents_in
from retrieval.passages import MAX_CHARS, passages
from retrieval.reading import read_document

QUESTIONS = Path(__file__).with_name("knowledge_questions.toml")
SAMPLES = Path(__file__).with_name("samples")
GUIDE = PROJECT_ROOT / "knowledge"
OUT = PROJECT_ROOT / "docs" / "benchmark"
HONEST = ("没有", "不知道", "不清楚", "无法", "未提及", "没提到", "未找到", "未说明", "并未", "未包含", "不确定")
CONCURRENCY = 4  # chats at once through the app
LONE_CHATS = 12  # questions asked one at a time, each way, for the first-token cost
SCALE_PASSAGES = 10_000


def load_questions() -> dict[str, list[dict]]:
    return tomllib.loads(QUESTIONS.read_text(encoding="utf-8"))


def right(answer: str, keys: list[list[str]]) -> bool:
    compact = answer.replace(" ", "")
    return all(any(key.replace(" ", "") in compact for key in group) for group in keys)


def honest(answer: str) -> bool:
    return any(phrase in answer for phrase in HONEST)


def recall(questions: list[dict], pairs: bool, folder: Path) -> dict:
    index = KnowledgeIndex(folder / f"recall-{pairs}.db", pairs=pairs)
    for documents in (GUIDE, SAMPLES):
        index.sync(documents)
    ranks, seconds = [], []
    for question in questions:
        started = time.perf_counter()
        found = index.search(question["question"], [GUIDE, SAMPLES], 10)
        seconds.append(time.perf_counter() - started)
        names = [passage.name for passage in found]
        ranks.append(names.index(question["source"]) + 1 if question["source"] in names else None)
    return {f"recall@{k}": round(sum(1 for rank in ranks if rank and rank <= k) / len(ranks), 3) for k in (1, 3, 5)} | {
        "search_ms_p50": round(1000 * statistics.median(seconds), 2)}


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


def scale(questions: list[dict], folder: Path, count: int = SCALE_PASSAGES) -> dict:
    big = folder / "big"
    big.mkdir()
    synthetic_document(big / "大型文档.md", count)
    index = KnowledgeIndex(folder / "scale.db")
    index.sync(GUIDE)
    report = index.sync(big)
    seconds = []
    for question in questions:
        started = time.perf_counter()
        index.search(question["question"], [GUIDE, big], 4)
        seconds.append(time.perf_counter() - started)
    seconds.sort()
    return {"passages": report.passages, "index_seconds": round(report.seconds, 1),
            "index_mib": round(index.path.stat().st_size / 2**20, 1),
            "search_ms_p50": round(1000 * statistics.median(seconds), 1),
            "search_ms_p95": round(1000 * seconds[int(0.95 * (len(seconds) - 1))], 1)}


async def ask(url: str, question: str, knowledge: bool) -> dict:
    client = ChatClient(url)
    await client.connect()
    await client.socket.emit("chat_settings_change", {"knowledge": knowledge})
    await asyncio.sleep(0.2)  # the settings change lands before the question
    asked = time.perf_counter()
    await client.ask_and_wait(question, timeout=600)
    reply = client.replies()[-1]
    await client.socket.disconnect()
    answer, _, sources = reply.partition(SOURCES_MARK)
    return {"question": question, "answer": answer, "sources": [name.split(" · ")[0] for name in sources.split("；")
                                                                 if name],
            "first_token_s": round(client.token_times[0] - asked, 3), "tokens": client.generated_tokens,
            "tokens_per_s": client.footer.get("tokens_per_s")}


async def answers(url: str, questions: list[str], knowledge: bool) -> list[dict]:
    at_once = asyncio.Semaphore(CONCURRENCY)

    async def one(question: str) -> dict:
        async with at_once:
            return await ask(url, question, knowledge)

    return await asyncio.gather(*(one(question) for question in questions))


def through_the_app(model: str, questions: dict[str, list[dict]], quick: bool) -> dict:
    every = [item for kind in ("guide", "handbook", "uncovered") for item in questions[kind]]
    lone = [item["question"] for item in questions["guide"][1::8]][:LONE_CHATS]
    with tempfile.TemporaryDirectory() as scratch:
        operators = Path(scratch) / "operators"
        operators.mkdir()
        for sample in SAMPLES.iterdir():
            (operators / sample.name).write_bytes(sample.read_bytes())
        with AppProcess(model, Path(scratch) / "app.log", CHAT_TEMPERATURE="0", CHAT_MAX_NEW_TOKENS="160",
                        CHAT_KNOWLEDGE_DIR=str(operators)) as app:
            app.wait_until_ready()
            result = {}
            for knowledge in (True, False):
                # Lone chats first, on questions this way has not asked yet: a question asked again would find its
                # prompt in vLLM's prefix cache and measure the cache, not the passages' cost.
                alone = [asyncio.run(ask(app.url, question, knowledge)) for question in lone]
                replies = asyncio.run(answers(app.url, [item["question"] for item in every], knowledge))
                by_question = dict(zip((item["question"] for item in every), replies))
                result["on" if knowledge else "off"] = summary(questions, by_question) | {
                    "lone_first_token_s_median": round(statistics.median(reply["first_token_s"] for reply in alone), 3),
                    "lone_tokens_per_s_median": statistics.median(reply["tokens_per_s"] for reply in alone
                                                                  if reply["tokens_per_s"] is not None),
                    "replies": replies}
    return result


def summary(questions: dict[str, list[dict]], replies: dict[str, dict]) -> dict:
    def share(items: list[bool]) -> float:
        return round(sum(items) / len(items), 3)

    figures = {}
    for kind in ("guide", "handbook"):
        got = [replies[item["question"]] for item in questions[kind]]
        figures[f"{kind}_right"] = share([right(reply["answer"], item["keys"]) for reply, item in
                                          zip(got, questions[kind])])
        figures[f"{kind}_source_named"] = share([item["source"] in reply["sources"] for reply, item in
                                                 zip(got, questions[kind])])
    figures["uncovered_honest"] = share([honest(replies[item["question"]]["answer"]) for item in questions["uncovered"]])
    return figures


def table(results: dict) -> str:
    lines = ["| model | knowledge base | guide right | handbook right | source named (guide / handbook) | "
             "uncovered: honest | lone chat: first token, tokens/s |", "|---|---|---|---|---|---|---|"]
    for model, runs in results["models"].items():
        for mode, run in runs.items():
            lines.append(f"| {model} | {mode} | {run['guide_right']:.0%} | {run['handbook_right']:.0%} | "
                         f"{run['guide_source_named']:.0%} / {run['handbook_source_named']:.0%} | "
                         f"{run['uncovered_honest']:.0%} | {run['lone_first_token_s_median']:.2f} s, "
                         f"{run['lone_tokens_per_s_median']} |")
    recall_rows = [f"| {name} | {figures['recall@1']:.0%} | {figures['recall@3']:.0%} | {figures['recall@5']:.0%} | "
                   f"{figures['search_ms_p50']} ms |" for name, figures in results["recall"].items()]
    big = results["scale"]
    return "\n".join([
        "Answers (temperature 0, through the app; right = every key phrase group present):", "", *lines, "",
        "Retrieval alone, the document each question is about among the passages found:", "",
        "| terms | recall@1 | recall@3 | recall@5 | search p50 |", "|---|---|---|---|---|", *recall_rows, "",
        f"At scale: {big['passages']:,} passages indexed in {big['index_seconds']} s ({big['index_mib']} MiB); "
        f"search p50 {big['search_ms_p50']} ms, p95 {big['search_ms_p95']} ms.", ""])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.knowledge", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=["demo-0.5b", "demo-1.5b"])
    parser.add_argument("--quick", action="store_true", help="a fifth of the questions, for a try")
    parser.add_argument("--out", type=Path, default=OUT / "knowledge.json", help="the JSON file (the table beside it)")
    arguments = parser.parse_args()
    questions = load_questions()
    if arguments.quick:
        questions = {kind: items[::5] for kind, items in questions.items()}
    covered = questions["guide"] + questions["handbook"]
    with tempfile.TemporaryDirectory() as scratch:
        results = {"questions": {kind: len(items) for kind, items in questions.items()},
                   "recall": {"words": recall(covered, False, Path(scratch)),
                              "words + character pairs": recall(covered, True, Path(scratch))},
                   "scale": scale(covered, Path(scratch))}
    print(json.dumps(results, ensure_ascii=False, indent=1))
    results["models"] = {model: through_the_app(model, questions, arguments.quick) for model in arguments.models}
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")
    arguments.out.with_suffix(".md").write_text(table(results), encoding="utf-8")
    print(table(results))


if __name__ == "__main__":
    main()
