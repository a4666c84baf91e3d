"""A scripted chat engine for the handler tests: `engine.api`'s door, without vLLM or a model.

Prompts go through the real `engine.prompt.render_prompt` with a stand-in tokenizer (one token per
character, Qwen's chat markup), so old turns are dropped and a message too long is refused as the real
engine does. The reply is a script, not a model's:
- it starts with how many messages it was given, `[N messages]`, so a test can tell what the app kept;
- then words `w1 w2 ...` up to the reply budget, one every `TOKEN_SECONDS` whether or not the app keeps up
  (the words due since the app last asked arrive as one delta, as the real engine's do);
- a question containing `[fail]` ends after three words with the engine-fault error a dead engine gives;
- a question containing `[quote]` is answered with the newest message as the engine got it (with whatever the
  app put around the question), a few characters per token;
- a question containing `[nothing]` is answered with nothing at all (as a reply the model ends at once, or at a stop
  text it starts with);
- a question containing `[blank lines]` is answered with 3,000 blank lines between two words, as a small model
  caught in a loop writes them;
- with `Sampling.thinking` on, its first `THINKING_WORDS` words are thinking (`t1 t2 ...`), as a thinking
  model's are, and the answer follows;
- with `Sampling.logprobs` asked for, each word is a token of probability 0.9 with one alternative, ` alt`
  (0.09), and the prompt's tokens are its characters; a reply continued from chosen tokens (`continue_reply`) goes on
  with ` c1 c2 ...`; weighing a prompt (`prompt_logprobs`) takes `PREFILL_SECONDS` and gives each token 0.5.
Its statistics are measured like the real engine's: times of its own tokens, counted.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from config.errors import EngineUnavailableError, MessageTooLongError
from config.message import Message
from config.settings import Settings
from engine.api import EngineState, Finished, Refused, ReplyEvent, ReplyStats, Sampling, TextDelta, TokenProbability
from engine.prompt import RenderedPrompt, render_prompt

log = logging.getLogger(__name__)
TOKEN_SECONDS = 0.02
PREFILL_SECONDS = 0.5  # how long weighing a prompt (`prompt_logprobs`) takes
FAIL = "[fail]"
QUOTE = "[quote]"
BLANK_LINES = "[blank lines]"
NOTHING = "[nothing]"
THINKING_WORDS = 25  # half a second: time to press stop while it thinks
ALTERNATIVE = 7  # the token id of every word's one alternative


class CharacterTokenizer:
    """One token per character, under Qwen's chat markup."""

    def apply_chat_template(self, conversation: list[dict[str, str]], **options: Any) -> str:
        turns = "".join(f"<|im_start|>{turn['role']}\n{turn['content']}<|im_end|>\n" for turn in conversation)
        return turns + "<|im_start|>assistant\n"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(character) for character in text]


class FakeEngine:
    model_name = "scripted-fake"

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._running = 0
        self._ids = itertools.count(1000)
        self._texts: dict[int, str] = {}  # each word's token id (new for every word said), and ALTERNATIVE's

    @classmethod
    def load(cls, settings: Settings, model: Path) -> FakeEngine:
        engine = cls(settings)
        log.info("Engine ready: %s (tests/fake_engine.py), in 0.0 s", engine.model_name)
        return engine

    async def reply(self, system_prompt: str, history: list[Message], sampling: Sampling) -> AsyncIterator[ReplyEvent]:
        try:
            prompt = await asyncio.to_thread(render_prompt, CharacterTokenizer(), system_prompt, history,
                                             self._settings.max_model_len - sampling.max_new_tokens)
        except MessageTooLongError as error:
            yield Refused(str(error))
            return
        if sampling.logprobs:  # the teaching view shows the prompt's tokens, one a character
            prompt = replace(prompt, pieces=tuple(map(chr, prompt.token_ids)))
        yield prompt
        thinking = [f"t{index} " for index in range(1, THINKING_WORDS + 1)] if sampling.thinking else []
        newest = history[-1]["content"]
        said = ([newest[start:start + 4] for start in range(0, len(newest), 4)] if QUOTE in newest else
                ["好的", *["\n" * 1000] * 3, "完"] if BLANK_LINES in newest else
                [f" w{index}" for index in range(1, sampling.max_new_tokens - len(thinking))])
        words = [] if NOTHING in newest else [*thinking, f"[{len(history)} messages]",
                                              *said[:sampling.max_new_tokens - len(thinking) - 1]]
        async for event in self._say(prompt, words, len(thinking), 3 if FAIL in newest else len(words), sampling):
            yield event

    async def continue_reply(self, prompt: RenderedPrompt, start: Sequence[int], sampling: Sampling
                             ) -> AsyncIterator[TextDelta | Finished]:
        yield TextDelta("".join(self._texts[token] for token in start), ReplyStats(len(prompt.token_ids)),
                        token_ids=tuple(start))
        words = [f" c{index}" for index in range(1, max(1, sampling.max_new_tokens - len(start)) + 1)]
        async for event in self._say(prompt, words, 0, len(words), sampling):
            yield event

    async def _say(self, prompt: RenderedPrompt, words: list[str], thinking: int, last: int,
                   sampling: Sampling) -> AsyncIterator[TextDelta | Finished]:
        """`words` at the fake's pace, the first `thinking` of them thinking, with a fault after `last`."""
        ids = [next(self._ids) for _ in words]
        self._texts.update(zip(ids, words))
        self._texts[ALTERNATIVE] = " alt"
        started = time.perf_counter()
        stats = ReplyStats(prompt_tokens=len(prompt.token_ids), started=started)
        self._running += 1
        try:
            while stats.generated_tokens < len(words):
                if stats.generated_tokens == last:
                    raise EngineUnavailableError("模型引擎出错，正在自动重启，请稍后再问。 The model engine failed while "
                                                 "answering (scripted fault); it is restarting, please ask again in a "
                                                 "moment.")
                said = stats.generated_tokens
                await asyncio.sleep(max(0.0, started + (said + 1) * TOKEN_SECONDS - time.perf_counter()))
                due = min(last, int((time.perf_counter() - started) / TOKEN_SECONDS))
                stats = replace(stats, generated_tokens=due, first_token_at=started + TOKEN_SECONDS,
                                last_token_at=started + due * TOKEN_SECONDS)
                for kind, first, last_word in (("thinking", said, min(due, thinking)), ("answer", max(said, thinking), due)):
                    if first < last_word:
                        yield TextDelta("".join(words[first:last_word]), stats, kind, tuple(ids[first:last_word]),
                                        tuple(TokenProbability(token, words[index], math.log(0.9),
                                                               ((token, words[index], math.log(0.9)),
                                                                (ALTERNATIVE, " alt", math.log(0.09))))
                                              for index, token in enumerate(ids[first:last_word], first))
                                        if sampling.logprobs else ())
            yield Finished(replace(stats, finish_reason="length" if words else "stop"))
        finally:
            self._running -= 1

    async def prompt_logprobs(self, prompt: RenderedPrompt) -> list[float | None]:
        """Every prompt token after the first at probability 0.5, after `PREFILL_SECONDS` of scripted prefill."""
        self._running += 1
        try:
            await asyncio.sleep(PREFILL_SECONDS)
        finally:
            self._running -= 1
        return [None, *[math.log(0.5)] * (len(prompt.token_ids) - 1)]

    def tokens(self, text: str) -> list[tuple[int, str]]:
        return [(ord(character), character) for character in text]  # one token per character, as it renders

    def state(self) -> EngineState:
        return EngineState(self.model_name, "scripted", "none", 1, self._settings.max_model_len, self._running)

    def is_alive(self) -> bool:
        return True

    def is_ready(self) -> bool:
        return True

    def shutdown(self) -> None:
        pass
