"""`python -m bench.compare`: what the Compare switch costs a lone chat.

This app's engine on the demo model (the weights the app serves here) answers one question alone, greedy, and a
question twice at once as Compare asks it (greedy and at temperature 1.2: one batch), the second reply with a new
draw and with a fixed seed (vLLM's own sampler then runs), alternating, `--repeats` times, every question new to
the engine, `--tokens` tokens each (end-of-sequence ignored). Reports each reply's decode rate and first token
against the reply alone; medians. Writes `docs/benchmark/compare.json`.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from dataclasses import replace
from pathlib import Path

from bench.engine_runs import demo_engine, timed_replies
from bench.workload import stage_parser
from engine.api import Sampling
from engine.prompt import render_prompt
from engine.vllm_engine import VllmEngine
from harness.figures import Reply
from harness.questions import questions, system_prompt


async def answer(engine: VllmEngine, question: str, samplings: list[Sampling]) -> list[Reply]:
    """One reply per sampling to `question`, all submitted at once, timed from their arrival."""
    prompt = render_prompt(engine.tokenizer, system_prompt(), [{"role": "user", "content": question}],
                           budget=engine.settings.max_model_len - samplings[0].max_new_tokens)
    return await timed_replies(engine, [(prompt, sampling) for sampling in samplings])


def main() -> None:
    arguments = stage_parser("compare", __doc__, tokens=128, repeats=3).parse_args()
    model, engine = demo_engine()
    settings = engine.settings
    greedy = Sampling(0.0, 1.0, arguments.tokens, top_k=settings.top_k, ignore_eos=True)
    hot = replace(greedy, temperature=1.2, top_p=settings.sampling_defaults()[1])
    pairs = {"": hot, "_seeded": replace(hot, seed=42)}
    runs: dict[str, list[dict]] = {"alone": [], **{f"compared{pair}_{side}": [] for pair in pairs
                                                    for side in ("greedy", "hot")}}
    try:
        for repeat in range(arguments.repeats):
            asked = questions(f"compare-{repeat}", 3)
            timed = {"alone": asyncio.run(answer(engine, asked[0], [greedy]))[0]}
            for (pair, second), question in zip(pairs.items(), asked[1:]):
                timed[f"compared{pair}_greedy"], timed[f"compared{pair}_hot"] = asyncio.run(
                    answer(engine, question, [greedy, second]))
            for side, reply in timed.items():
                runs[side].append({"tokens_per_s": round(reply.decode_rate, 1), "first_token_s": round(reply.first_token, 2)})
            print(f"==> run {repeat + 1}: " + ", ".join(f"{side} {run[-1]}" for side, run in runs.items()), flush=True)
    finally:
        engine.shutdown()
    medians = {side: {key: statistics.median(run[key] for run in side_runs) for key in side_runs[0]}
               for side, side_runs in runs.items()}
    result = {"model": model.name, "weights": engine.weight_format, "new_tokens": arguments.tokens,
              "repeats": arguments.repeats, "median": medians, "runs": runs,
              "compared_over_alone_tokens_per_s": {side: round(medians[side]["tokens_per_s"] /
                                                               medians["alone"]["tokens_per_s"], 2)
                                                   for side in runs if side != "alone"}}
    Path(arguments.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({key: result[key] for key in ("median", "compared_over_alone_tokens_per_s")}, indent=1))


if __name__ == "__main__":
    main()
