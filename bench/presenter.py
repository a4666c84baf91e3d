"""`python -m bench.presenter`: speed as a presenter sees it, a real Chromium page on the same machine as the app,
against visitors from elsewhere (socket clients, one and eight at once), all on the same app in one run.

For each configuration (`CONFIGS`: the app's defaults, and the same with one core kept from the engine for the
web server, as vLLM's CPU guide recommends), alternating, `--repeats` times: the app serves one long greedy reply
(a question it has not seen, `--tokens` new tokens, end-of-sequence ignored) to a socket client, then eight to
eight socket clients at once, then one to a Chromium page. The socket clients' rate is their streamed deltas'
(tokens after each one's first over the time from the first delta to the last); the page's is its reply's text
as shown, re-tokenised with the model's tokenizer, over the time between the text's first and last change in
the page. The page's CPU (Chromium's whole process tree) is reported per 100 streamed tokens. The summary gives
the page's rate against the socket client's on the same app, and each rate with the reserved core against the
defaults. Writes `docs/benchmark/presenter.json` (or `--out`).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
from playwright.sync_api import sync_playwright
from transformers import AutoTokenizer

from bench.workload import DEMO, stage_parser
from config.settings import load_settings
from harness.app_process import AppProcess
from harness.browser import REPLY, launch_chromium
from harness.questions import question
from harness.visitor import ChatClient
from modelprep.source import resolve_model

# The app's defaults, and the same with a core reserved for the web server (`CHAT_RESERVED_CPUS`).
CONFIGS: dict[str, dict[str, str]] = {"defaults": {}, "reserved_core": {"CHAT_RESERVED_CPUS": "1"}}
WATCH_REPLY = """
window.replyChanges = [];
new MutationObserver(() => {
    const replies = document.querySelectorAll('%s');
    if (!replies.length) return;
    const length = replies[replies.length - 1].innerText.length;
    const last = window.replyChanges.at(-1);
    if (!last || last[1] !== length) window.replyChanges.push([performance.now(), length]);
}).observe(document, {subtree: true, childList: true, characterData: true});
""" % REPLY


def socket_rate(url: str, texts: list[str]) -> dict:
    """One socket client per question, all at once: their tokens after the first over the time from the first
    delta of any to the last delta of any."""
    async def ask(text: str) -> ChatClient:
        client = ChatClient(url)
        await client.connect()
        await client.ask(text)
        await asyncio.wait_for(client.done.wait(), 900)
        await client.socket.disconnect()
        return client

    async def ask_all() -> dict:
        clients = await asyncio.gather(*(ask(text) for text in texts))
        elapsed = max(client.token_times[-1] for client in clients) - min(client.token_times[0] for client in clients)
        tokens = sum(client.generated_tokens - 1 for client in clients)
        return {"chats": len(texts), "tokens": tokens, "tokens_per_s": tokens / elapsed}

    # On a thread of its own: Playwright's sync API keeps an event loop running on this one.
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, ask_all()).result()


def chromium_cpu(browser_pid: int) -> float:
    total = 0.0
    for process in [psutil.Process(browser_pid), *psutil.Process(browser_pid).children(recursive=True)]:
        try:
            times = process.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return total


def page_rate(playwright, url: str, text: str, tokenizer) -> dict:
    browser = launch_chromium(playwright)
    browser_pid = next(process.pid for process in psutil.Process().children(recursive=True)
                       if "chromium" in process.name() and "--type=" not in " ".join(process.cmdline()))
    try:
        page = browser.new_page(locale="zh-CN", viewport={"width": 1400, "height": 900})
        page.add_init_script(WATCH_REPLY)
        page.goto(url)
        page.wait_for_selector("#chat-input:not([disabled])", timeout=120_000)
        page.wait_for_timeout(2000)  # the sidebar and settings arrive after the input
        cpu_before = chromium_cpu(browser_pid)
        page.fill("#chat-input", text)
        page.click("#chat-submit")
        page.wait_for_selector(REPLY, timeout=300_000)
        page.wait_for_selector("#chat-submit", timeout=900_000)  # the send button returns when the reply ends
        cpu = chromium_cpu(browser_pid) - cpu_before
        shown = page.locator(REPLY).last.inner_text()
        changes = page.evaluate("window.replyChanges")
    finally:
        browser.close()
    tokens = len(tokenizer.encode(shown, add_special_tokens=False))
    elapsed = (changes[-1][0] - changes[0][0]) / 1000
    return {"tokens": tokens, "tokens_per_s": (tokens - 1) / elapsed, "changes": len(changes),
            "page_cpu_s_per_100_tokens": 100 * cpu / tokens}


def run(model: Path, tokens: int, repeats: int) -> dict:
    tokenizer = AutoTokenizer.from_pretrained(model)
    results: dict[str, dict] = {name: {"socket": [], "socket_8": [], "page": []} for name in CONFIGS}
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as scratch:
        for repeat in range(repeats):
            for name, env in CONFIGS.items():  # alternating, so a busy moment of the machine hits both
                app = AppProcess(model, Path(scratch) / f"{name}.log", CHAT_TEMPERATURE="0",
                                 CHAT_REPETITION_PENALTY="1", CHAT_MAX_NEW_TOKENS=str(tokens), CHAT_IGNORE_EOS="true",
                                 **env)
                try:
                    app.wait_until_ready()
                    socket_rate(app.url, [question(str(repeat), 0)])  # warm: the first reply of an app is slower
                    results[name]["socket"].append(socket_rate(app.url, [question(str(repeat), 1)]))
                    results[name]["socket_8"].append(socket_rate(app.url, [question(str(repeat), 10 + chat)
                                                                          for chat in range(8)]))
                    results[name]["page"].append(page_rate(playwright, app.url, question(str(repeat), 2), tokenizer))
                finally:
                    app.stop()
                print(name, results[name]["socket"][-1]["tokens_per_s"], results[name]["page"][-1], flush=True)
    summary = {name: {where: round(statistics.median(run["tokens_per_s"] for run in runs[where]), 2)
                      for where in ("socket", "socket_8", "page")} | {
                   "page_cpu_s_per_100_tokens": round(statistics.median(
                       run["page_cpu_s_per_100_tokens"] for run in runs["page"]), 2)}
               for name, runs in results.items()}
    for name in CONFIGS:
        summary[name]["page_vs_socket"] = round(summary[name]["page"] / summary[name]["socket"], 2)
    summary["reserved_core_vs_defaults"] = {where: round(summary["reserved_core"][where] / summary["defaults"][where], 2)
                                            for where in ("socket", "socket_8", "page")}
    return {"model": model.name, "new_tokens": tokens, "repeats": repeats, "configs": CONFIGS, "summary": summary,
            "runs": results}


def main() -> None:
    parser = stage_parser("presenter", __doc__, tokens=256, repeats=3)
    parser.add_argument("--model", type=Path, help="model folder (default: the benchmarks' demo model, as served)")
    arguments = parser.parse_args()
    settings = load_settings()
    model = arguments.model or resolve_model(DEMO, settings.cache_dir, prepare=False,
                                             weights=settings.weights)
    result = run(model, arguments.tokens, arguments.repeats)
    arguments.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"], indent=1))


if __name__ == "__main__":
    main()
