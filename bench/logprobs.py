"""`python -m bench.logprobs`: what the teaching view's token probabilities cost the engine's decode speed.

This app's engine on the demo model (the weights the app serves here) writes `--tokens` tokens (greedy,
end-of-sequence ignored) for one chat and for eight at once, with vLLM's log-probabilities of the 20 likeliest
tokens at each place (`Sampling.logprobs`, what the teaching view asks for) and without, alternating, `--repeats`
times, every question new to the engine; medians. First, right after the engine is ready, it times the first token
of a first reply with log-probabilities and of the next one (a teacher turning the view on in front of a class).
Writes `docs/benchmark/logprobs.json`.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from pathlib import Path

from bench.engine_runs import demo_engine, timed_replies
from bench.workload import prompts, stage_parser
from engine.api import Sampling
from engine.distribution import ALTERNATIVES
from engine.vllm_engine import VllmEngine
from harness.figures import Reply, summarise

CHATS = (1, 8)


async def serve(engine: VllmEngine, chats: int, sampling: Sampling, tag: str) -> float:
    """Tokens per second over all `chats` replies, submitted together."""
    return summarise(await replies(engine, chats, sampling, tag))["aggregate_tokens_per_s"]


async def replies(engine: VllmEngine, chats: int, sampling: Sampling, tag: str) -> list[Reply]:
    """The replies to `chats` new questions submitted together, timed from their arrival."""
    return await timed_replies(engine, [(prompt, sampling) for prompt in prompts(
        engine.tokenizer, tag, chats, engine.settings.max_model_len, sampling.max_new_tokens)])


def main() -> None:
    arguments = stage_parser("logprobs", __doc__, tokens=128, repeats=3).parse_args()
    model, engine = demo_engine()
    sides = {"off": 0, "on": ALTERNATIVES}
    runs: dict[str, dict[int, list[float]]] = {side: {chats: [] for chats in CHATS} for side in sides}
    try:
        teaching = Sampling(0.7, 0.8, 8, top_k=20, logprobs=ALTERNATIVES)
        first_tokens = [round(asyncio.run(replies(engine, 1, teaching, f"logprobs-first-{index}"))[0].first_token, 2)
                        for index in range(2)]
        print(f"==> first token of the first two replies with log-probabilities: {first_tokens} s", flush=True)
        for repeat in range(arguments.repeats):
            for chats in CHATS:
                for side, alternatives in sides.items():
                    sampling = Sampling(0.0, 1.0, arguments.tokens, ignore_eos=True, logprobs=alternatives)
                    rate = asyncio.run(serve(engine, chats, sampling, f"logprobs-{side}-{chats}-{repeat}"))
                    runs[side][chats].append(round(rate, 1))
                    print(f"==> logprobs {side}, {chats} chats, run {repeat + 1}: {rate:.1f} tokens/s", flush=True)
    finally:
        engine.shutdown()
    medians = {side: {f"{chats}_chats_tokens_per_s": statistics.median(rates) for chats, rates in by_chats.items()}
               for side, by_chats in runs.items()}
    result = {"model": model.name, "weights": engine.weight_format, "new_tokens": arguments.tokens,
              "repeats": arguments.repeats, "alternatives": ALTERNATIVES,
              "first_teaching_replies_first_token_s": first_tokens, "median": medians, "runs": runs,
              "on_over_off": {key: round(medians["on"][key] / medians["off"][key], 2) for key in medians["off"]}}
    Path(arguments.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({key: result[key] for key in ("first_teaching_replies_first_token_s", "median", "on_over_off")},
                     indent=1))


if __name__ == "__main__":
    main()
