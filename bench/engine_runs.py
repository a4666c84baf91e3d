"""This app's engine (`engine.chat_engine.VllmEngine`, with the app's settings) serving N chats at once.

The N requests are submitted together from one asyncio loop, as the app's sessions submit theirs, and
read through the same event channel; times are the engine's own token events (`ReplyStats`).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from bench.workload import CONCURRENCY, NEW_TOKENS, prompts
from config.settings import load_settings
from engine.api import ReplyStats, Sampling
from engine.chat_engine import VllmEngine
from harness.figures import Reply, median_run, summarise
from telemetry.memory import tree_pss

GREEDY = Sampling(temperature=0.0, top_p=1.0, max_new_tokens=NEW_TOKENS, ignore_eos=True)


def start_replies(engine: VllmEngine, tag: str, users: int,
                  sampling: Sampling) -> tuple[asyncio.Future, list[ReplyStats]]:
    """The workload's `users` chats (questions tagged `tag`) submitted together from the running loop: the future
    of all their replies, and each one's latest statistics, replaced as its events arrive."""
    rendered = prompts(engine.tokenizer, tag, users, engine.settings.max_model_len)
    latest = [ReplyStats(len(prompt.token_ids)) for prompt in rendered]

    async def chat(index: int, prompt) -> None:
        async for event in engine.stream_reply(prompt, sampling):
            latest[index] = event.stats

    return asyncio.gather(*(chat(index, prompt) for index, prompt in enumerate(rendered))), latest


async def _serve(engine: VllmEngine, tag: str, users: int) -> dict:
    replies, stats = start_replies(engine, tag, users, GREEDY)
    arrival = time.perf_counter()
    await replies
    assert all(reply.generated_tokens == NEW_TOKENS for reply in stats), [reply.generated_tokens for reply in stats]
    return summarise([Reply(reply.first_token_at - arrival, reply.last_token_at - arrival, reply.generated_tokens)
                      for reply in stats])


def run(model: str, concurrency: tuple[int, ...] = CONCURRENCY, repeats: int = 1) -> dict:
    settings = load_settings()
    engine = VllmEngine.load(settings, Path(model))
    try:
        runs = [median_run([asyncio.run(_serve(engine, f"{users}-{repeat}", users)) for repeat in range(repeats)])
                for users in concurrency]
        return {"load_seconds": engine.load_seconds, "weights": engine.weight_format,
                "memory_bytes": tree_pss(os.getpid()), "runs": runs}
    finally:
        engine.shutdown()
