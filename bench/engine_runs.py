"""This app's engine (`engine.vllm_engine.VllmEngine`, with the app's settings) serving N chats at once.

The N requests are submitted together from one asyncio loop, as the app's sessions submit theirs, and
read through the same event channel; times are the engine's own token events (`ReplyStats`).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from bench.workload import CONCURRENCY, DEMO, NEW_TOKENS, prompts
from config.settings import load_settings
from engine.api import ReplyStats, Sampling
from engine.prompt import RenderedPrompt
from engine.vllm_engine import VllmEngine
from harness.figures import Reply, median_run, summarise
from modelprep.source import resolve_model
from telemetry.memory import tree_pss

GREEDY = Sampling(temperature=0.0, top_p=1.0, max_new_tokens=NEW_TOKENS, ignore_eos=True)


def demo_engine() -> tuple[Path, VllmEngine]:
    """The demo model's folder, with the weights the app serves here, and this app's engine on it."""
    settings = load_settings()
    model = resolve_model(DEMO, settings.cache_dir, prepare=False, weights=settings.weights)
    return model, VllmEngine.load(settings, model)


def start_replies(engine: VllmEngine, requests: list[tuple[RenderedPrompt, Sampling]]
                  ) -> tuple[asyncio.Future, list[ReplyStats]]:
    """Each request submitted, together, from the running loop: the future of all their replies, and each one's
    latest statistics, replaced as its events arrive."""
    latest = [ReplyStats(len(prompt.token_ids)) for prompt, _ in requests]

    async def chat(index: int, prompt: RenderedPrompt, sampling: Sampling) -> None:
        async for event in engine.stream_reply(prompt, sampling):
            latest[index] = event.stats

    return asyncio.gather(*(chat(index, *request) for index, request in enumerate(requests))), latest


async def timed_replies(engine: VllmEngine, requests: list[tuple[RenderedPrompt, Sampling]]) -> list[Reply]:
    """Each request's reply, all submitted together, timed from their arrival."""
    replies, stats = start_replies(engine, requests)
    arrival = time.perf_counter()
    await replies
    return [Reply(reply.first_token_at - arrival, reply.last_token_at - arrival, reply.generated_tokens)
            for reply in stats]


async def _serve(engine: VllmEngine, tag: str, users: int) -> dict:
    rendered = prompts(engine.tokenizer, tag, users, engine.settings.max_model_len)
    replies = await timed_replies(engine, [(prompt, GREEDY) for prompt in rendered])
    assert all(reply.tokens == NEW_TOKENS for reply in replies), [reply.tokens for reply in replies]
    return summarise(replies)


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
