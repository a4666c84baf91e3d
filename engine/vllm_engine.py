"""The in-process chat engine: one vLLM `AsyncLLM` driven by one worker thread, streaming `engine.api` events.

`VllmEngine.load` starts a thread with its own asyncio loop and builds vLLM's
`AsyncLLM` on it (vLLM starts its engine-core process, which runs the model, from there). Every reply of every
session is a request on that one loop, so vLLM batches concurrent replies; callers on any other loop
(Chainlit's) receive immutable events through a `Channel` and never block. Speaks messages, sampling
settings, text and measured statistics; knows nothing of Chainlit.
"""

from __future__ import annotations

import asyncio
import ctypes.util
import itertools
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from transformers import PreTrainedTokenizerBase
from vllm import SamplingParams
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.inputs.engine import tokens_input
from vllm.sampling_params import RequestOutputKind
from vllm.utils.ompmultiprocessing import OMPProcessManager
from vllm.v1.engine.async_llm import AsyncLLM

from config.errors import EngineUnavailableError, ModelLoadError
from config.settings import Settings
from engine.api import EngineState, Finished, ReplyStats, Sampling, TextDelta, TokenProbability, coalesce
from engine.bridge import Channel
from engine.distribution import ALTERNATIVES
from engine.metrics import SchedulerWatch
from engine.prompt import RenderedPrompt
from engine.replies import StreamingEngine, render_reply
from engine.shared_tokenizer import SharedTokenizer
from engine.spawn import main_module_hidden
from engine.speculation import speculative_config
from engine.token_text import pieces, split
from modelprep.hardware import resolve_dtype
from modelprep.quantization.checkpoint import weight_format
from modelprep.sizing import KV_BLOCK_TOKENS, kv_cache_budget

log = logging.getLogger(__name__)
T = TypeVar("T")
TCMALLOC = ctypes.util.find_library("tcmalloc_minimal")  # Debian's libtcmalloc-minimal4, if installed


def engine_options(settings: Settings, model: Path) -> dict[str, Any]:
    """vLLM's engine arguments for `settings`; also sets the variables vLLM's worker processes read at start.

    The defaults come from the benchmark (docs/performance.md): all cores bound to the engine, which
    the web server preempts when it needs to (the engine runs at low priority); tcmalloc preloaded into
    the engine's processes when the system has it; KV blocks of 32 tokens instead of vLLM's 128 on CPU, so
    a persona's system prompt (about 80 tokens) is cached and shared by every chat instead of computed
    for each; at most `batch_tokens` per step, so chats that start together get first tokens in turn; and a
    KV cache just large enough for every chat at full context, unless `CHAT_KV_CACHE_GIB` sets it. The
    engine-core process runs the model itself (vLLM's "uni" executor) instead of handing every step to a worker
    process of its own: one process fewer to spawn and import vLLM into, and no hop between two processes per step; `load` binds its threads to cores as vLLM binds a worker's, and
    puts a repetition penalty, top-k/top-p and draw that do not pass over the whole vocabulary into vLLM's
    sampler there (`engine.sampler_speedup`).
    """
    # One machine, no network needed: without an address vLLM finds its own by "connecting" a socket to
    # 8.8.8.8, and unless told not to it reports usage statistics to its makers' server.
    os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
    os.environ["VLLM_NO_USAGE_STATS"] = "1"
    # vLLM's CPU platform allows the "uni" executor only when told the engine core is not multiprocessing;
    # AsyncLLM still runs the engine core in a process of its own.
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    # vLLM's n-gram proposer (CHAT_SPECULATION) runs in numba's threads. Numba's default OpenMP layer shares the
    # OpenMP runtime the model's threads are bound in, and every step then ran slower: one chat at 10 tokens/s
    # instead of 18, eight at 45 instead of 73 (docs/performance.md). Its own thread pool leaves them alone.
    os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
    if settings.threads:
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{settings.threads - 1}"
    else:
        os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(settings.reserved_cpus)
    preload = os.environ.get("LD_PRELOAD", "")
    if TCMALLOC and "tcmalloc" not in preload:
        os.environ["LD_PRELOAD"] = f"{TCMALLOC}:{preload}" if preload else TCMALLOC
    return {
        "model": str(model),
        "dtype": resolve_dtype(settings.dtype),
        "max_model_len": settings.max_model_len,
        "max_num_seqs": settings.max_concurrent_replies,
        "max_num_batched_tokens": settings.batch_tokens,
        "block_size": KV_BLOCK_TOKENS,
        "kv_cache_memory_bytes": kv_cache_budget(json.loads((model / "config.json").read_text()),
                                                 settings.max_concurrent_replies, settings.max_model_len,
                                                 resolve_dtype(settings.dtype), settings.kv_cache_gib),
        "enforce_eager": True,  # torch.compile gains a little speed for a much longer start (docs/design-figures.md)
        "distributed_executor_backend": "uni",
        "worker_extension_cls": "engine.worker_extension.WorkerExtension",
        "max_logprobs": ALTERNATIVES,
        "speculative_config": speculative_config(settings),
    }


class VllmEngine(StreamingEngine):
    """One process-wide engine. Build it with `VllmEngine.load`; share it between all chat sessions."""

    def __init__(self, settings: Settings, model: Path, tokenizer: PreTrainedTokenizerBase, llm: AsyncLLM,
                 watch: SchedulerWatch, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        self.settings = settings
        self.tokenizer = tokenizer
        self.model_name = model.name
        self.dtype = resolve_dtype(settings.dtype)
        # int8 or 4-bit linear layers (modelprep.quantization) or the 16/32-bit dtype every weight runs in.
        stored = weight_format(model)
        self.weight_format = stored if stored in ("int8", "int4") else self.dtype
        self.load_seconds = 0.0  # measured by load(): tokenizer, vLLM start-up and warm-up
        self._llm = llm
        self._watch = watch
        self._loop = loop
        self._thread = thread
        self._request_ids = itertools.count()

    @classmethod
    def load(cls, settings: Settings, model: Path) -> VllmEngine:
        """Start the engine thread and build vLLM on it for the model folder `model` (checked by
        `modelprep.preflight`). Blocks until ready."""
        started = time.perf_counter()
        args = AsyncEngineArgs(**engine_options(settings, model))
        loop = asyncio.new_event_loop()

        def run_engine_loop() -> None:
            # Niceness is per thread on Linux and inherited by the processes a thread starts: vLLM's
            # engine processes then leave the CPU to the web server (and a presenter's browser on the
            # same machine) when both want it, and take all of it otherwise.
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), settings.engine_nice)
            loop.run_forever()

        thread = threading.Thread(target=run_engine_loop, name="chat-engine", daemon=True)
        thread.start()

        watch = SchedulerWatch()

        async def build() -> AsyncLLM:
            config = args.create_engine_config()
            # The OpenMP variables vLLM gives a worker process (threads, cores to bind them to), given here
            # to the engine-core process, which runs the model; this process's OpenMP has started already.
            with OMPProcessManager(config).configure_omp_envs(rank=0, local_rank=0), main_module_hidden():
                llm = AsyncLLM.from_vllm_config(config, stat_loggers=[watch.logger])
            if not all(await llm.collective_rpc("install_sampler_speedup")):
                log.warning("vLLM's sampler is not the one engine.sampler_speedup knows: its own sampler runs")
            if args.speculative_config and not all(await llm.collective_rpc("install_rejection_kernels")):
                raise ModelLoadError("vLLM's rejection sampler is not the one engine.speculation knows: set "
                                     "CHAT_SPECULATION=off")
            return llm

        try:
            llm = asyncio.run_coroutine_threadsafe(build(), loop).result()
        except Exception as error:
            loop.call_soon_threadsafe(loop.stop)
            raise ModelLoadError(f"The engine could not start on {model}: {error}. See the log above "
                                 "for vLLM's reason (unsupported model, not enough memory, ...).") from error
        # vLLM's own copy of the model's tokenizer (a second one would slow the start), one call at a time.
        engine = cls(settings, model, SharedTokenizer(llm.get_tokenizer()), llm, watch, loop, thread)
        engine._warm_up()
        engine.load_seconds = time.perf_counter() - started
        log.info("Engine ready: %s, %s weights, %s activations, in %.1f s", engine.model_name, engine.weight_format,
                 engine.dtype, engine.load_seconds)
        return engine

    def _warm_up(self) -> None:
        """One short sampled request, so the first visitor does not pay for the set-up of vLLM's sampler
        (compiled on its first use) and CPU kernels. It asks for log-probabilities too, as the teaching view does,
        so the first reply with the view on does not pay for theirs (docs/design-figures.md). Greedy replies need
        no set-up of their own; longer prompts warm nothing more."""
        sampling = Sampling(0.7, 0.8, 2, top_k=20, repetition_penalty=1.05, logprobs=ALTERNATIVES)
        prompt, _ = render_reply(self.tokenizer, "", [{"role": "user", "content": "hi"}], sampling,
                                  self.settings.max_model_len)

        async def run() -> None:
            async for _ in self.stream_reply(prompt, sampling):
                pass

        asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    def _probabilities(self, completion, alternatives: int | None) -> tuple[TokenProbability, ...]:
        """vLLM's log-probabilities of each new token and of the `alternatives` likeliest at its place."""
        if not alternatives or not completion.logprobs:
            return ()
        chosen = []
        for token_id, entry in zip(completion.token_ids, completion.logprobs):
            top = sorted((item for item in entry.items() if item[1].rank <= alternatives), key=lambda item: item[1].rank)
            texts = pieces(self.tokenizer, [token_id, *(other for other, _ in top)])
            chosen.append(TokenProbability(token_id, texts[0], entry[token_id].logprob,
                                           tuple((other, text, value.logprob)
                                                 for (other, value), text in zip(top, texts[1:]))))
        return tuple(chosen)

    def _submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        if self._llm.errored or not self._thread.is_alive():
            coroutine.close()
            raise EngineUnavailableError("模型引擎已停止，正在自动重启，请稍后再问。 The model engine has stopped and is "
                                         "restarting; please ask again in a moment.")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    async def _generate(self, prompt: RenderedPrompt, params: SamplingParams, request_id: str,
                        channel: Channel[TextDelta | Finished], started: float) -> None:
        """Runs on the engine thread: one event per engine output of one request into `channel`."""
        stats = ReplyStats(prompt_tokens=len(prompt.token_ids), started=started)
        try:
            async for output in self._llm.generate(tokens_input(prompt.token_ids, prompt=prompt.text),
                                                   params, request_id=request_id):
                completion = output.outputs[0]
                now = time.perf_counter()
                stats = replace(stats, finish_reason=completion.finish_reason)
                if completion.token_ids:
                    stats = replace(stats, first_token_at=stats.first_token_at or now, last_token_at=now,
                                    generated_tokens=stats.generated_tokens + len(completion.token_ids))
                    channel.put(TextDelta(completion.text, stats, token_ids=tuple(completion.token_ids),
                                          logprobs=self._probabilities(completion, params.logprobs)))
        except asyncio.CancelledError:
            # Wakes a consumer that is still waiting (an engine shutdown rather than a stop button).
            channel.close(EngineUnavailableError("The reply was cancelled because the engine is stopping."))
            raise
        except Exception as error:
            channel.close(EngineUnavailableError(
                f"模型引擎出错，正在自动重启，请稍后再问。 The model engine failed while answering ({error}); it is "
                "restarting, please ask again in a moment."))
            raise
        channel.put(Finished(stats))
        channel.close()

    async def prompt_logprobs(self, prompt: RenderedPrompt) -> list[float | None]:
        return await asyncio.wrap_future(self._submit(self._prefill(prompt)))

    async def _prefill(self, prompt: RenderedPrompt) -> list[float | None]:
        """Runs on the engine thread: one request that computes the prompt's log-probabilities and one token."""
        params = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=0)
        last = None
        async for output in self._llm.generate(tokens_input(prompt.token_ids, prompt=prompt.text), params,
                                               request_id=f"prompt-{next(self._request_ids)}"):
            last = output
        return [None if entry is None else entry[token].logprob
                for token, entry in zip(prompt.token_ids, last.prompt_logprobs)]

    async def stream_reply(self, prompt: RenderedPrompt, sampling: Sampling) -> AsyncIterator[TextDelta | Finished]:
        """The reply's text deltas as the engine produces them (those that arrived together as one), then
        `Finished`. Leaving the loop early (a stop button, a cancelled task) aborts the engine request."""
        params = SamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            repetition_penalty=sampling.repetition_penalty,
            max_tokens=sampling.max_new_tokens,
            ignore_eos=sampling.ignore_eos,
            logprobs=sampling.logprobs or None,
            seed=sampling.seed,
            stop=list(sampling.stop) or None,
            output_kind=RequestOutputKind.DELTA,
        )
        channel: Channel[TextDelta | Finished] = Channel(asyncio.get_running_loop())
        request_id = f"chat-{next(self._request_ids)}"
        job = self._submit(self._generate(prompt, params, request_id, channel, time.perf_counter()))
        ended, generated = False, 0
        try:
            async for events in channel:
                for event in coalesce(events):
                    generated = event.stats.generated_tokens
                    yield event
            ended = True
        finally:
            if not ended and not job.done():
                # Cancelling the engine-side task makes AsyncLLM abort the request in the engine core.
                job.cancel()
                log.info("Request %s aborted after %d tokens", request_id, generated)

    def tokens(self, text: str) -> list[tuple[int, str]]:
        return split(self.tokenizer, text)

    def state(self) -> EngineState:
        """The model, how it runs, and vLLM's latest report of requests running and waiting and KV-cache use."""
        scheduler = self._watch.latest
        return EngineState(self.model_name, self.weight_format, self.dtype, self.settings.threads or "auto",
                           self.settings.max_model_len, scheduler.running, scheduler.waiting, scheduler.kv_cache_usage,
                           proposed=scheduler.proposed, accepted=scheduler.accepted)

    def is_alive(self) -> bool:
        """False once vLLM's engine process has died (killed, out of memory) or was shut down."""
        return not self._llm.errored and self._thread.is_alive()

    def is_ready(self) -> bool:
        return self.is_alive()

    def running_requests(self) -> int:
        return self._llm.get_num_unfinished_requests()

    def shutdown(self) -> None:
        """Stop vLLM's processes and the engine thread. Safe to call more than once."""
        if not self._thread.is_alive():
            return
        self._llm.shutdown()

        async def cancel_leftover_tasks() -> None:
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel_leftover_tasks(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        log.info("Engine shut down")
