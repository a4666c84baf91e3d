"""The baseline: transformers `generate` in bf16, the way a Chainlit app without vLLM serves a chat.

Default threads and attention; `generate` runs on a thread and a `TextIteratorStreamer` hands the text
to the caller, as such an app streams to its page. The users are served one after another: user k's
times count from the common arrival, so they include the wait for the k - 1 before. The first k replies
of one run of eight are therefore the run of k users.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TextIteratorStreamer

from bench.workload import NEW_TOKENS, prompts
from harness.figures import Reply, summarise
from telemetry.memory import tree_pss


class TimedStreamer(TextIteratorStreamer):
    """The app's streamer, also noting the time of every token `generate` hands it."""

    def __init__(self, tokenizer) -> None:
        super().__init__(tokenizer, skip_prompt=True, skip_special_tokens=True)
        self.token_times: list[float] = []
        self._prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if self._prompt_seen:  # the first call carries the prompt
            self.token_times.extend([time.perf_counter()] * value.numel())
        self._prompt_seen = True
        super().put(value)


def run(model: str, users: int) -> dict:
    folder = Path(model)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    network = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)
    rendered = prompts(tokenizer, "sequential", users)
    warm = torch.tensor([rendered[0].token_ids])
    network.generate(warm, max_new_tokens=4, do_sample=False)  # as the engine, start measured runs warm
    replies = []
    arrival = time.perf_counter()
    for prompt in rendered:
        streamer = TimedStreamer(tokenizer)
        inputs = torch.tensor([prompt.token_ids])
        worker = threading.Thread(target=network.generate, kwargs=dict(
            input_ids=inputs, attention_mask=torch.ones_like(inputs), streamer=streamer, do_sample=False,
            max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS))
        worker.start()
        text = "".join(streamer)  # the caller's side of the stream, as a chat handler consumes it
        worker.join()
        assert text and len(streamer.token_times) == NEW_TOKENS, len(streamer.token_times)
        replies.append(Reply(streamer.token_times[0] - arrival, streamer.token_times[-1] - arrival, NEW_TOKENS))
    runs = [summarise(replies[:count]) for count in sorted({1, 2, 4, users}) if count <= users]
    return {"threads": torch.get_num_threads(), "memory_bytes": tree_pss(os.getpid()), "runs": runs}
