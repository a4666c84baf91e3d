"""`python -m bench.studies.speculation_speed`: what prompt-lookup speculation (`CHAT_SPECULATION`, `engine.speculation`) gives a
visitor, against the app without it and against llama.cpp's own server, in one run on one machine.

Systems, one after another: the app with `CHAT_SPECULATION=off`, the app with `ngram` (both through their sockets,
as visitors), and, where `--llama` is given, llama-server on the demo's Q4_K_M GGUF with its defaults and with its
own n-gram lookup. Workloads, each question asked once per system (a repeat would measure the prefix cache):
- grounded: one tour-guide question per entry of the guide (`bench/knowledge_questions.toml`, Chinese and English),
  one visitor at a time, temperature 0, natural lengths. llama-server gets the same prompt (the persona, the
  passages the app's own retrieval finds, the question, through the model's own chat template) and is asked for as
  many tokens as the app's reply with speculation off had;
- open chat: knowledge off, `--tokens` per reply, end-of-sequence ignored, one visitor at a time (temperature 0),
  then `AT_ONCE` chats at the same moment (the app's default sampling).
Decode rates run from a reply's first streamed token to its last; token counts are the app's own (its footer) and
llama-server's chunks (one per token). Also: the share of proposed tokens the model kept (the app's `/metrics`), and
how many grounded replies are the same text with speculation on and off. Writes docs/benchmark/speculation.json and
speculation.md (or `--out`).
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import psutil
from transformers import AutoTokenizer

from bench import llama_server
from bench.knowledge_scoring import GUIDE, load_questions
from bench.workload import stage_parser
from config.personas import load_personas
from config.settings import PROJECT_ROOT, load_settings
from engine.prompt import render_prompt
from harness.app_process import AppProcess
from harness.questions import questions
from harness.visitor import ChatClient
from history.conversation import model_text
from modelprep.demo import DEMOS
from modelprep.source import resolve_model
from retrieval.grounding import RULES, grounded
from retrieval.knowledge_base import KnowledgeBase

MODEL = "demo-1.5b"  # the default demo model
AT_ONCE = 8
GREEDY = {"temperature": 0}
LLAMA_NGRAM = ("--spec-type", "ngram-simple")  # llama-server's own prompt lookup, its defaults


def grounded_questions() -> list[str]:
    """Short and long: the first question on every sixth entry of the guide (Chinese, then English), and the eight
    tour-guide questions that ask for routes and descriptions (`harness.questions`)."""
    asked = load_questions()
    chosen = {}
    for kind in ("guide", "english"):
        for item in asked[kind]:
            chosen.setdefault((kind, item["source"]), item["question"])
    return [*list(chosen.values())[::6], *questions("grounded", 8)]


async def visit(url: str, question: str, options: dict) -> dict:
    """One visitor's reply to `question` with the chat settings `options`: its text, its tokens and decode rate as
    the app measured them (its footer), and when its first and last token reached the visitor."""
    client = ChatClient(url)
    await client.connect()
    await client.socket.emit("chat_settings_change", options)
    await asyncio.sleep(0.2)  # the settings change lands before the question
    arrival = time.perf_counter()
    await client.ask_and_wait(question, timeout=600)
    await client.socket.disconnect()
    times = client.token_times or [time.perf_counter()]  # the app's own reply ("not in the guide") streams none
    return {"question": question, "text": model_text(client.latest_reply()), "tokens": client.generated_tokens,
            "decode_tokens_per_s": client.footer.get("tokens_per_s"), "first_token_s": times[0] - arrival,
            "done_s": times[-1] - arrival}


async def at_once(url: str, asked: list[str], options: dict) -> dict:
    """`asked` by as many visitors at the same moment: tokens per second over all of them (from the common start to
    the last token), and the first tokens."""
    replies = await asyncio.gather(*(visit(url, question, options) for question in asked))
    return {"tokens_per_s": sum(reply["tokens"] for reply in replies) / max(reply["done_s"] for reply in replies),
            "first_token_p50_s": statistics.median(reply["first_token_s"] for reply in replies)}


def accepted(url: str) -> tuple[int, int]:
    """The tokens speculation proposed and those kept, since the app started (its `/metrics`)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return tuple(int(float(re.search(rf"^chat_speculative_{name}_tokens_total (\S+)$", text, re.M)[1]))
                 for name in ("proposed", "accepted"))


def run_app(model: Path, speculation: str, grounded_asked: list[str], tokens: int, scratch: Path) -> dict:
    """The app with `CHAT_SPECULATION=speculation`: grounded replies, then open chat alone and `AT_ONCE` at once."""
    result = {"system": f"this app, speculation {speculation}"}
    with AppProcess(model, scratch / f"app-{speculation}.log", CHAT_SPECULATION=speculation) as app:
        app.wait_until_ready()
        result["grounded"] = [asyncio.run(visit(app.url, question, {"temperature": 0})) for question in grounded_asked]
        result["grounded_proposed_accepted"] = accepted(app.url)
    with AppProcess(model, scratch / f"app-{speculation}-open.log", CHAT_SPECULATION=speculation,
                    CHAT_MAX_NEW_TOKENS=str(tokens), CHAT_IGNORE_EOS="true") as app:
        app.wait_until_ready()
        options = {"knowledge": False, "temperature": 0}
        result["open"] = [asyncio.run(visit(app.url, question, options)) for question in questions("alone", 4)]
        result["at_once"] = asyncio.run(at_once(app.url, questions("together", AT_ONCE), {"knowledge": False}))
        result["open_proposed_accepted"] = accepted(app.url)
    return result


def grounded_prompts(tokenizer, asked: list[str], budget: int) -> list:
    """The prompts the app builds for `asked` with the guide's documents: its persona, its rules, the passages its
    retrieval finds within `budget` tokens, the question, through the model's own template."""
    persona = load_personas(PROJECT_ROOT / "prompts", "tour_guide")[0]
    with tempfile.TemporaryDirectory() as folder:
        knowledge = KnowledgeBase(Path(folder) / "index.db", Path(folder), {persona.name: (GUIDE,)})
        knowledge.sync_all(first=True)
        prompts = []
        for question in asked:
            history = [{"role": "user", "content": question}]
            found = knowledge.search(persona.name, history, budget, lambda text: len(tokenizer.encode(text)))
            prompts.append(render_prompt(tokenizer, persona.system_prompt + RULES, grounded(history, found), 4096))
    return prompts


async def llama_alone(url: str, prompt, tokens: int) -> dict:
    """llama-server's greedy reply of `tokens` tokens (end-of-sequence ignored) to a rendered prompt: its decode rate
    as the server measured it (its closing chunk's timings) and when its first and last token arrived."""
    body = {"prompt": prompt.token_ids, "n_predict": tokens, "stream": True, "cache_prompt": True,
            "ignore_eos": True, **GREEDY}
    times, timings = [], {}
    async with httpx.AsyncClient(timeout=None) as client:
        arrival = time.perf_counter()
        async with client.stream("POST", f"{url}/completion", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    chunk = json.loads(line[6:])
                    if chunk.get("stop"):
                        timings = chunk["timings"]
                        break
                    times.append(time.perf_counter())
    return {"tokens": timings["predicted_n"], "decode_tokens_per_s": timings["predicted_per_second"],
            "first_token_s": times[0] - arrival, "done_s": times[-1] - arrival,
            "accepted": [timings.get("draft_n_accepted", 0), timings.get("draft_n", 0)]}


def run_llama(tools: Path, gguf: Path, label: str, extra: tuple[str, ...], prompts: list, lengths: list[int],
              open_prompts: list, tokens: int, scratch: Path) -> dict:
    """llama-server with `extra` flags: the grounded prompts, each for `lengths` tokens, then open chat."""
    server = llama_server.LlamaServer(tools, gguf, AT_ONCE, 4096 * AT_ONCE, scratch / f"{label}.log", extra)
    try:
        server.wait_until_ready()
        return {"system": label,
                "grounded": [asyncio.run(llama_alone(server.url, prompt, length))
                             for prompt, length in zip(prompts, lengths) if length > 1],
                "open": [asyncio.run(llama_alone(server.url, prompt, tokens)) for prompt in open_prompts]}
    finally:
        server.stop()


def summary(system: dict) -> dict:
    """A system's medians: decode rate of one visitor on each workload, first token, and acceptance."""
    figures = {workload: round(statistics.median(reply["decode_tokens_per_s"] for reply in system[workload]
                                                 if reply["decode_tokens_per_s"]), 1) for workload in ("grounded", "open")}
    figures["grounded_first_token_s"] = round(statistics.median(r["first_token_s"] for r in system["grounded"]), 2)
    if "at_once" in system:
        figures |= {"at_once_tokens_per_s": round(system["at_once"]["tokens_per_s"], 1),
                    "at_once_first_token_p50_s": round(system["at_once"]["first_token_p50_s"], 2)}
    for workload in ("grounded", "open"):
        proposed, kept = system.get(f"{workload}_proposed_accepted", (0, 0))
        if proposed:
            figures[f"{workload}_accepted"] = round(kept / proposed, 3)
    return figures


def same_text(off: list[dict], on: list[dict]) -> str:
    """How many of the replies the model wrote (not the app's own "not in the guide") are the same text both ways."""
    written = [(a, b) for a, b in zip(off, on) if a["decode_tokens_per_s"] and b["decode_tokens_per_s"]]
    return f"{sum(a['text'] == b['text'] for a, b in written)} of {len(written)}"


def table(result: dict) -> str:
    lines = [f"{result['model']}, {result['cpu_cores']} cores; one visitor at a time unless said; tokens/s from a "
             "reply's first token to its last.", "",
             "| system | grounded, 1 visitor | open chat, 1 visitor | first token, grounded | "
             f"{AT_ONCE} chats at once | first token at {AT_ONCE} | accepted (grounded / open) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for system in result["systems"]:
        figures = system["summary"]
        kept = " / ".join(f"{figures[key]:.0%}" for key in ("grounded_accepted", "open_accepted") if key in figures)
        lines.append(f"| {system['system']} | {figures['grounded']} | {figures['open']} | "
                     f"{figures['grounded_first_token_s']} s | {figures.get('at_once_tokens_per_s', '–')} | "
                     f"{figures.get('at_once_first_token_p50_s', '–')}{' s' if 'at_once' in system else ''} | "
                     f"{kept or '–'} |")
    lines += ["", f"Grounded replies the same text with speculation on and off: {result['same_text']}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = stage_parser("speculation", __doc__, tokens=256, repeats=1)
    parser.add_argument("--model", default=MODEL, choices=sorted(DEMOS))
    parser.add_argument("--llama", action="store_true", help="llama-server too (built once into the cache)")
    arguments = parser.parse_args()
    settings = load_settings()
    model = resolve_model(arguments.model, settings.cache_dir, prepare=False, weights=settings.weights)
    folder = resolve_model(arguments.model, settings.cache_dir, prepare=False, weights="original")
    asked = grounded_questions()
    with tempfile.TemporaryDirectory() as scratch:
        systems = [run_app(model, mode, asked, arguments.tokens, Path(scratch)) for mode in ("off", "ngram")]
        if arguments.llama:
            tokenizer = AutoTokenizer.from_pretrained(folder)
            tools = llama_server.build(settings.cache_dir)
            gguf = settings.cache_dir / "demo" / f"{DEMOS[arguments.model].name}.gguf"
            prompts = grounded_prompts(tokenizer, asked, settings.max_model_len // 3)
            lengths = [reply["tokens"] if reply["decode_tokens_per_s"] else 0 for reply in systems[0]["grounded"]]
            open_prompts = [render_prompt(tokenizer, load_personas(PROJECT_ROOT / "prompts", "tour_guide")[0]
                                          .system_prompt, [{"role": "user", "content": question}], 4096)
                            for question in questions("alone", 4)]
            for label, extra in (("llama-server, defaults", ()), ("llama-server, n-gram lookup", LLAMA_NGRAM)):
                systems.append(run_llama(tools, gguf, label, extra, prompts, lengths, open_prompts, arguments.tokens,
                                         Path(scratch)))
    for system in systems:
        system["summary"] = summary(system)
    result = {"model": model.name, "cpu_cores": psutil.cpu_count(), "tokens": arguments.tokens, "systems": systems,
              "same_text": same_text(systems[0]["grounded"], systems[1]["grounded"])}
    arguments.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    arguments.out.with_suffix(".md").write_text(table(result))
    print(table(result))


if __name__ == "__main__":
    main()
