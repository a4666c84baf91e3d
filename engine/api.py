"""The one door to a chat engine: what the app gives it, what it gets back, and what it can read.

The app hands an engine a persona's system prompt, the conversation and the sampling settings, and reads
an async stream of events: first the rendered prompt (or a refusal, before anything is kept), then text
deltas, then one `Finished` with the reply's measured statistics. Every event is an immutable value, so
nothing mutable is shared between the engine's thread and the app's event loop. Implementations: the
in-process vLLM engine (`engine.vllm_engine`), vLLM servers elsewhere (`engine.remote_engine`) and the scripted
fake the handler tests use (`tests/fake_engine.py`). No vLLM here: the fake runs without it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from config.message import Message
from engine.prompt import RenderedPrompt


@dataclass(frozen=True)
class Sampling:
    temperature: float
    top_p: float
    max_new_tokens: int
    top_k: int = 0  # 0 = off
    repetition_penalty: float = 1.0  # 1 = off
    ignore_eos: bool = False  # benchmarks and tests generate an exact count
    thinking: bool = False  # think before answering, where the chat template has the switch (Qwen3's)
    logprobs: int = 0  # the most likely alternatives to report for each token (the teaching view), 0 = none
    seed: int | None = None  # a sampled reply's random seed: the same seed, prompt and settings give the same reply
    stop: tuple[str, ...] = ()  # texts that end the reply where the model writes them; the reply keeps what came before


@dataclass(frozen=True)
class ReplyStats:
    """Measured with `time.perf_counter()` around engine events; token counts from the engine's output."""

    prompt_tokens: int
    generated_tokens: int = 0
    started: float = 0.0  # when the request was submitted
    first_token_at: float | None = None
    last_token_at: float | None = None
    finish_reason: str | None = None  # "stop", "length" or "abort"

    @property
    def time_to_first_token(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.started

    @property
    def reply_time(self) -> float | None:
        """From the request to its last token."""
        return None if self.last_token_at is None else self.last_token_at - self.started

    @property
    def decode_tokens_per_second(self) -> float | None:
        """Tokens after the first, over the time from the first to the last token."""
        if self.first_token_at is None or self.last_token_at is None or self.generated_tokens < 2:
            return None
        elapsed = self.last_token_at - self.first_token_at
        return (self.generated_tokens - 1) / elapsed if elapsed > 0 else None


@dataclass(frozen=True)
class Refused:
    """The reply cannot start (the message does not fit the context); nothing should be kept."""

    message: str


@dataclass(frozen=True)
class TokenProbability:
    """One generated token as the model weighed it: its id, its text (`engine.token_text.piece`), its log-probability
    as the model gave it (before temperature, top-k, top-p and penalties), and the most likely tokens at its
    place as (id, text, log-probability), most likely first."""

    token_id: int
    piece: str
    logprob: float
    top: tuple[tuple[int, str, float], ...]


@dataclass(frozen=True)
class TextDelta:
    """New text of the reply, with the statistics as of its last token."""

    text: str
    stats: ReplyStats
    kind: Literal["answer", "thinking"] = "answer"
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[TokenProbability, ...] = ()  # one per token, when `Sampling.logprobs` asked for them


@dataclass(frozen=True)
class Finished:
    stats: ReplyStats


ReplyEvent = RenderedPrompt | Refused | TextDelta | Finished


def coalesce(events: list[TextDelta | Finished]) -> list[TextDelta | Finished]:
    """Events that arrived together, with their deltas as one (the text joined, the latest statistics): a
    consumer that fell behind catches up in one step instead of paying its per-delta cost for each."""
    deltas = [event for event in events if isinstance(event, TextDelta)]
    merged = [TextDelta("".join(delta.text for delta in deltas), deltas[-1].stats, deltas[-1].kind,
                        tuple(token for delta in deltas for token in delta.token_ids),
                        tuple(token for delta in deltas for token in delta.logprobs))] if deltas else []
    return merged + [event for event in events if isinstance(event, Finished)]


@dataclass(frozen=True)
class ServerReport:
    """One vLLM server behind the remote engine, as last checked."""

    url: str
    ready: bool
    problem: str  # why it is left out; empty when ready
    in_flight: int  # this app's replies on it now
    running: int
    waiting: int
    kv_cache_usage: float


@dataclass(frozen=True)
class EngineState:
    """What the sidebar shows of an engine: the model, how it runs, and its scheduler's latest report."""

    model: str
    weights: str  # "int8", or the dtype every weight runs in
    dtype: str
    threads: int | str  # "auto" when the engine chose
    context: int
    running: int = 0
    waiting: int = 0
    kv_cache_usage: float = 0.0  # 0..1
    servers: tuple[ServerReport, ...] = ()  # the remote engine's servers; none in process
    proposed: int = 0  # tokens speculation proposed since the engine started; 0 with speculation off
    accepted: int = 0  # of those, the tokens the model's own choice kept


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do beyond a reply; the page offers only that."""

    token_view: bool = True  # each token's probabilities, a branch from any token, the prompt's probabilities
    compare: bool = True  # two replies to one prompt at once, each with its own sampling


class ChatEngine(Protocol):
    model_name: str

    def reply(self, system_prompt: str, history: list[Message], sampling: Sampling) -> AsyncIterator[ReplyEvent]:
        """The events of one reply. The prompt is rendered (old turns dropped to fit) off the caller's event
        loop; the request starts when the event after the prompt is asked for. Raises `ChatError` if the
        engine fails mid-reply; leaving the stream early (a stop button) aborts the request."""

    def continue_reply(self, prompt: RenderedPrompt, start: Sequence[int], sampling: Sampling
                       ) -> AsyncIterator[TextDelta | Finished]:
        """The reply to `prompt` that begins with the tokens `start` (a reply's first tokens, the last one chosen by
        the teacher), continued by the model (`engine.replies.continued_events`): `start`'s text first, then the
        model's deltas, then `Finished`. Leaving the stream early aborts the request."""

    async def prompt_logprobs(self, prompt: RenderedPrompt) -> list[float | None]:
        """The model's log-probability of each prompt token after the ones before it (None for the first): one
        prefill of the whole prompt, for the teaching view. Raises `ChatError` where the engine cannot."""

    def tokens(self, text: str) -> list[tuple[int, str]]:
        """The model's tokens for `text`: each id with its text (`engine.token_text.split`); call off the event loop."""

    def state(self) -> EngineState: ...

    def is_alive(self) -> bool:
        """False once the engine cannot serve again by itself (its processes died): the service rebuilds it."""

    def is_ready(self) -> bool:
        """Whether a reply can start now (for the remote engine: at least one server answers)."""

    def shutdown(self) -> None: ...
