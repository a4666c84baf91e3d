"""The chat engine on other machines: vLLM's OpenAI-compatible servers (`CHAT_ENGINE_URLS`), one or several.

The prompt is rendered here with the model's own tokenizer and chat template, as the in-process engine
renders it, and sent as token ids to `/v1/completions`, so both paths give the model the same tokens. Each
new reply goes to the ready server with the fewest replies in flight. A thread checks every server every
`CHECK_SECONDS` (`/v1/models`, `/metrics`): a server that stops answering is left out until it answers
again, and one that serves another model, a shorter context or another tokenizer is left out with the
reason in the log. Leaving a reply's stream closes its connection, and vLLM aborts the request.
Times and token counts are measured here, as the replies' events arrive.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from config.errors import EngineUnavailableError, ModelLoadError
from config.settings import Settings
from engine.api import EngineState, Finished, ReplyStats, Sampling, ServerReport, TextDelta, coalesce
from engine.bridge import Channel
from engine.prompt import RenderedPrompt
from engine.replies import StreamingEngine
from engine.token_text import split

log = logging.getLogger(__name__)
CHECK_SECONDS = 2.0
CHECK_TIMEOUT = 3.0
PROBE = "导游 tour guide: 广州塔 Canton Tower, 2026!"  # the tokenizers must agree on this text


@dataclass(frozen=True)
class ReplicaState:
    ready: bool = False
    problem: str = "not checked yet"  # why it is not ready
    mismatch: bool = False  # it serves something else than this app expects: a restart will not fix it
    served: str = ""  # the model id the server answers to
    running: int = 0
    waiting: int = 0
    kv_cache_usage: float = 0.0


class Replica:
    """One vLLM server. `state` is replaced whole by the checking thread; `in_flight` is counted on the app's
    event loop, where every reply starts and ends."""

    def __init__(self, url: str) -> None:
        self.url = url  # the base URL, ending in /v1
        self.name = shown_address(url)  # the URL as logs, messages and health checks show it
        self.state = ReplicaState()
        self.in_flight = 0


def shown_address(url: str) -> str:
    """A server's URL without what may be secret in it (a user and password, a query) for everyone to see."""
    parts = urlsplit(url)
    host = f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname or ""
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def check_replica(url: str, headers: dict[str, str], settings: Settings,
                  tokenizer: PreTrainedTokenizerBase) -> ReplicaState:
    """Ask one server what it serves and how busy it is. A server that does not answer is not ready; one whose
    context is shorter than `CHAT_MAX_MODEL_LEN` or whose tokenizer is not the local one gets `mismatch` set."""
    root = url.removesuffix("/v1")
    try:
        with httpx.Client(headers=headers, timeout=CHECK_TIMEOUT) as client:
            models = client.get(f"{url}/models")
            models.raise_for_status()
            card = models.json()["data"][0]
            if (card.get("max_model_len") or 0) < settings.max_model_len:
                return ReplicaState(problem=f"its context is {card.get('max_model_len')} tokens, less than "
                                            f"CHAT_MAX_MODEL_LEN={settings.max_model_len}: start it with --max-model-len "
                                            f"{settings.max_model_len} or lower the setting", mismatch=True)
            probe = client.post(f"{root}/tokenize", json={"model": card["id"], "prompt": PROBE,
                                                          "add_special_tokens": False})
            probe.raise_for_status()
            if probe.json()["tokens"] != tokenizer.encode(PROBE, add_special_tokens=False):
                return ReplicaState(problem=f"it serves {card['id']}, whose tokenizer is not the one in CHAT_MODEL: "
                                            "point CHAT_MODEL at the served model's folder (its tokenizer files are "
                                            "enough)", mismatch=True)
            metrics = client.get(f"{root}/metrics")
            metrics.raise_for_status()
    except (httpx.HTTPError, ValueError, KeyError, IndexError) as error:
        said = str(error).replace(root, shown_address(root))  # httpx names the URL it asked, credentials and all
        return ReplicaState(problem=f"it does not answer ({type(error).__name__}: {said})")
    return ReplicaState(True, "", False, card["id"], *_load(metrics.text))


def locate_remote_model(settings: Settings) -> Path:
    """The local model folder, for its tokenizer; refuses a server that answers with a mismatch. A server that
    does not answer yet is fine: it joins when it does."""
    from modelprep.source import resolve_model

    model = resolve_model(settings.model, settings.cache_dir, prepare=False, weights="original")
    try:
        tokenizer = AutoTokenizer.from_pretrained(model)
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"CHAT_MODEL={model}: no tokenizer could be loaded from it ({error}). With "
                             "CHAT_ENGINE_URLS the app needs the model's tokenizer files, not its weights.") from None
    for url in settings.engine_urls:
        state = check_replica(url, _headers(settings), settings, tokenizer)
        if state.mismatch:
            raise ModelLoadError(f"CHAT_ENGINE_URLS: the vLLM server at {shown_address(url)} does not fit: "
                                 f"{state.problem}.")
    return model


def _headers(settings: Settings) -> dict[str, str]:
    """vLLM's `--api-key` is checked as a bearer token."""
    return {"Authorization": f"Bearer {settings.engine_api_key}"} if settings.engine_api_key else {}


def _load(metrics: str) -> tuple[int, int, float]:
    """Requests running and waiting and KV-cache use from vLLM's Prometheus metrics."""
    values = {sample.name: sample.value for family in text_string_to_metric_families(metrics)
              for sample in family.samples}
    return (int(values.get("vllm:num_requests_running", 0)), int(values.get("vllm:num_requests_waiting", 0)),
            values.get("vllm:kv_cache_usage_perc", 0.0))


class _Unreachable(Exception):
    """A server could not be connected to: the reply has not started, another server may take it."""


class RemoteEngine(StreamingEngine):
    """`engine.api.ChatEngine` in front of vLLM servers. Build it with `RemoteEngine.load`."""

    def __init__(self, settings: Settings, model: Path, tokenizer: PreTrainedTokenizerBase) -> None:
        self.settings = settings
        self.tokenizer = tokenizer
        self.model_name = model.name
        self.servers = [Replica(url) for url in settings.engine_urls]
        self._headers = _headers(settings)
        self._stopping = threading.Event()
        self._checker = threading.Thread(target=self._check_forever, name="server-checks", daemon=True)

    @classmethod
    def load(cls, settings: Settings, model: Path) -> RemoteEngine:
        """Load the tokenizer from `model` (no weights needed), check every server once, and keep checking."""
        started = time.perf_counter()
        engine = cls(settings, model, AutoTokenizer.from_pretrained(model))
        engine._check_all()
        engine._checker.start()
        ready = sum(server.state.ready for server in engine.servers)
        log.info("Engine ready: %s on %d of %d vLLM servers, in %.1f s", engine.model_name, ready,
                 len(engine.servers), time.perf_counter() - started)
        return engine

    def _check_all(self) -> None:
        for server in self.servers:
            state = check_replica(server.url, self._headers, self.settings, self.tokenizer)
            if state.ready != server.state.ready or state.problem != server.state.problem:
                if state.ready:
                    log.info("Replica %s is ready", server.name)
                else:
                    log.warning("Replica %s is left out: %s", server.name, state.problem)
            server.state = state

    def _check_forever(self) -> None:
        while not self._stopping.wait(CHECK_SECONDS):
            self._check_all()

    async def stream_reply(self, prompt: RenderedPrompt, sampling: Sampling) -> AsyncIterator[TextDelta | Finished]:
        """The reply from the least busy server that is ready, the next one where a server is found unreachable
        before it said anything."""
        for _ in self.servers:
            server = self._pick()
            server.in_flight += 1
            try:
                async with aclosing(self._stream(server, prompt, sampling)) as events:
                    async for event in events:
                        yield event
                return
            except _Unreachable:
                continue
            finally:
                server.in_flight -= 1
        self._pick()  # raises: none is ready now

    def _pick(self) -> Replica:
        ready = [server for server in self.servers if server.state.ready]
        if not ready:
            raise EngineUnavailableError("模型服务器暂时都无法连接，请稍后再问。 None of the model servers answers just now; "
                                         "please ask again in a moment (the server's log says why).")
        return min(ready, key=lambda server: server.in_flight)

    async def _stream(self, server: Replica, prompt: RenderedPrompt,
                      sampling: Sampling) -> AsyncIterator[TextDelta | Finished]:
        """The server's events as they arrive, those that arrived together as one: a reader task takes them off
        the connection while the app is busy with the last one. Leaving early cancels it, which closes the
        connection, and vLLM aborts the request."""
        channel: Channel[TextDelta | Finished] = Channel(asyncio.get_running_loop())
        reader = asyncio.create_task(self._read(server, prompt, sampling, channel))
        try:
            async for events in channel:
                for event in coalesce(events):
                    yield event
        finally:
            reader.cancel()

    async def _read(self, server: Replica, prompt: RenderedPrompt, sampling: Sampling,
                    channel: Channel[TextDelta | Finished]) -> None:
        body = {"model": server.state.served, "prompt": prompt.token_ids,
                "max_tokens": sampling.max_new_tokens, "temperature": sampling.temperature, "top_p": sampling.top_p,
                "top_k": sampling.top_k or -1, "repetition_penalty": sampling.repetition_penalty,
                "ignore_eos": sampling.ignore_eos, "stream": True, "return_token_ids": True,
                **({} if sampling.seed is None else {"seed": sampling.seed}),
                **({"stop": list(sampling.stop)} if sampling.stop else {})}
        stats = ReplyStats(prompt_tokens=len(prompt.token_ids), started=time.perf_counter())
        try:
            async with httpx.AsyncClient(headers=self._headers, timeout=httpx.Timeout(30, read=None)) as client:
                async with client.stream("POST", f"{server.url}/completions", json=body) as response:
                    if response.status_code != 200:
                        detail = (await response.aread()).decode(errors="replace")[:300]
                        raise EngineUnavailableError(f"模型服务器拒绝了这个请求。 The model server {server.name} refused "
                                                     f"the request ({response.status_code}: {detail}).")
                    async for line in response.aiter_lines():
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        chunk = json.loads(line[6:])
                        if "error" in chunk:
                            raise EngineUnavailableError(f"模型服务器在回答中途出错。 The model server {server.name} "
                                                         f"failed mid-reply: {chunk['error'].get('message')}")
                        choice = chunk["choices"][0]
                        now = time.perf_counter()
                        stats = replace(stats, finish_reason=choice.get("finish_reason"))
                        if choice.get("token_ids"):
                            stats = replace(stats, first_token_at=stats.first_token_at or now, last_token_at=now,
                                            generated_tokens=stats.generated_tokens + len(choice["token_ids"]))
                            channel.put(TextDelta(choice["text"], stats, token_ids=tuple(choice["token_ids"])))
        except httpx.ConnectError as error:
            server.state = ReplicaState(problem=f"it does not answer ({error})")
            log.warning("Replica %s does not answer: %s", server.name, error)
            channel.close(_Unreachable())
            return
        except httpx.HTTPError as error:
            server.state = ReplicaState(problem=f"it broke off a reply ({type(error).__name__})")
            log.warning("Replica %s broke off a reply: %s", server.name, error)
            channel.close(EngineUnavailableError("模型服务器在回答中途断开，请再问一次（会换一台服务器）。 The model server "
                                                 "stopped answering mid-reply; ask again and another server answers."))
            return
        except EngineUnavailableError as error:
            channel.close(error)
            return
        except (ValueError, KeyError, IndexError) as error:
            channel.close(EngineUnavailableError(f"模型服务器的回答无法读取。 The model server {server.name} answered "
                                                 f"something that is not vLLM's stream ({error})."))
            return
        channel.put(Finished(stats))
        channel.close()

    async def prompt_logprobs(self, prompt: RenderedPrompt) -> list[float | None]:
        raise EngineUnavailableError("提示词的概率只能在本机引擎上计算。 The prompt's probabilities are computed by the "
                                     "in-process engine only, not yet through vLLM servers (CHAT_ENGINE_URLS).")

    def tokens(self, text: str) -> list[tuple[int, str]]:
        return split(self.tokenizer, text)

    def state(self) -> EngineState:
        servers = tuple(ServerReport(server.name, state.ready, state.problem, server.in_flight, state.running,
                                     state.waiting, state.kv_cache_usage)
                        for server in self.servers for state in [server.state])
        ready = [server for server in servers if server.ready]
        return EngineState(self.model_name, "remote", "remote", f"{len(ready)}/{len(servers)} servers",
                           self.settings.max_model_len, sum(server.running for server in ready),
                           sum(server.waiting for server in ready),
                           max((server.kv_cache_usage for server in ready), default=0.0), servers)

    def is_alive(self) -> bool:
        return not self._stopping.is_set()

    def is_ready(self) -> bool:
        return any(server.state.ready for server in self.servers)

    def shutdown(self) -> None:
        self._stopping.set()
