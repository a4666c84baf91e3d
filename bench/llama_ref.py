"""The outside reference: llama.cpp (through llama-cpp-python) on the demo model's original 4-bit GGUF.

Optional: llama-cpp-python builds from source (about five minutes here), so it is not in the app's or
the tests' requirements; the benchmark runs it when it is installed. Like the baseline it serves the
users one after another, on all cores; token times are taken when llama.cpp asks for each token's logits
processing, which is also where end-of-sequence is masked so every reply has the workload's length.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
from llama_cpp import Llama, LogitsProcessorList
from transformers import AutoTokenizer

from bench.workload import NEW_TOKENS, prompts
from harness.figures import Reply, summarise
from telemetry.memory import tree_pss


def run(gguf: str, tokenizer_folder: str, users: int) -> dict:
    llama = Llama(model_path=gguf, n_ctx=2048, n_threads=os.cpu_count(), verbose=False)
    rendered = prompts(AutoTokenizer.from_pretrained(Path(tokenizer_folder)), "sequential", users)
    end_tokens = [llama.token_eos()]

    def generate(prompt_ids: list[int], times: list[float]) -> None:
        def mark(_ids, scores):
            times.append(time.perf_counter())
            scores[end_tokens] = -np.inf
            return scores

        llama.reset()
        for _ in llama.create_completion(prompt_ids, max_tokens=NEW_TOKENS, temperature=0.0, stream=True,
                                         logits_processor=LogitsProcessorList([mark])):
            pass

    generate(rendered[0].token_ids[:16], [])  # start warm, as the other systems do
    replies = []
    arrival = time.perf_counter()
    for prompt in rendered:
        times: list[float] = []
        generate(prompt.token_ids, times)
        assert len(times) == NEW_TOKENS, len(times)
        replies.append(Reply(times[0] - arrival, times[-1] - arrival, NEW_TOKENS))
    runs = [summarise(replies[:count]) for count in sorted({1, 2, 4, users}) if count <= users]
    return {"threads": os.cpu_count(), "memory_bytes": tree_pss(os.getpid()), "runs": runs}
