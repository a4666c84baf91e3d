"""Speculative decoding (`engine.speculation`): the kernels it needs in vLLM's CPU build, its settings, and on the
real engine (the tiny model) that it runs, that greedy replies are the model's argmax at every token, and that
sampled replies come from the same distribution as without it (a chi-square test over many draws)."""

import asyncio
import collections
import os

import pytest
import torch

from config.errors import ConfigError
from config.settings import load_settings
from engine.api import Sampling, TextDelta
from engine.speculation import expand, speculative_config

DRAWS = 400  # replies drawn on each engine for the chi-square test
POSITION = 1  # the token compared: the second drawn (the first comes from the prompt, which no proposal precedes)


@pytest.mark.fast
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
def test_expand_writes_each_chats_value_once_per_token(dtype):
    values = torch.tensor([0.5, -1, 2], dtype=torch.float32).to(dtype)
    cumulative = torch.tensor([2, 2, 5], dtype=torch.int32)  # the second chat has no token
    output = torch.full((6,), 9, dtype=dtype)
    expand(output, values, cumulative, replace_from=-1, replace_to=7)
    assert output.tolist() == torch.tensor([0.5, 0.5, 2, 2, 2, 9], dtype=torch.float32).to(dtype).tolist()
    expand(output, torch.tensor([-1, 3], dtype=dtype), torch.tensor([1, 3], dtype=torch.int32), -1, 7)
    assert output[:3].tolist() == [7, 3, 3]  # a temperature of -1 read as 7, as vLLM's kernel does


@pytest.mark.fast
def test_the_settings_name_what_they_take():
    assert speculative_config(load_settings({"CHAT_SPECULATION": "off"})) is None
    assert speculative_config(load_settings({}))["method"] == "ngram"  # on unless told otherwise
    on = speculative_config(load_settings({"CHAT_SPECULATIVE_TOKENS": "6"}))
    assert on["method"] == "ngram" and on["num_speculative_tokens"] == 6
    assert on["num_speculative_tokens_per_batch_size"] == [(1, 1, 6), (2, 8, 0)]  # a lone chat only, by default
    assert "num_speculative_tokens_per_batch_size" not in speculative_config(load_settings(
        {"CHAT_SPECULATION": "ngram", "CHAT_SPECULATION_MAX_CHATS": "8"}))  # every batch size
    with pytest.raises(ConfigError, match="CHAT_SPECULATION='eagle' is not one of ngram, off"):
        load_settings({"CHAT_SPECULATION": "eagle"})
    with pytest.raises(ConfigError, match="CHAT_SPECULATIVE_TOKENS=0 must be 1–8"):
        load_settings({"CHAT_SPECULATIVE_TOKENS": "0"})


@pytest.mark.fast
def test_the_sidebar_shows_the_share_of_proposed_tokens_the_model_kept():
    from engine.api import EngineState
    from telemetry.memory import MemoryFloor, MemoryReading, memory_figures
    from ui.stats_panel import panel_props

    engine = EngineState("m", "int8", "bfloat16", "auto", 4096, proposed=40, accepted=30)
    props = panel_props(engine, memory_figures(MemoryReading(1, 2, 3, 4), MemoryFloor(0)), None, streaming=False)
    assert props["engine"]["speculation_accepted_percent"] == 75.0


@pytest.fixture(scope="module")
def repeater(tmp_path_factory):
    """A tiny model that mostly repeats its last token, greedily always: its replies copy themselves, so n-gram
    proposals are made and often kept."""
    from tests.tiny_model import build_tiny_qwen

    return build_tiny_qwen(tmp_path_factory.mktemp("models") / "repeater", initializer_range=0.06)


def _engine(folder, speculation: str):
    from engine.vllm_engine import VllmEngine

    # Proposals at every batch size: the draws below run eight at a time.
    return VllmEngine.load(load_settings({"CHAT_MODEL": str(folder), "CHAT_KV_CACHE_GIB": "1",
                                          "CHAT_MAX_MODEL_LEN": "2048", "CHAT_SPECULATION": speculation,
                                          "CHAT_SPECULATION_MAX_CHATS": "8"}), folder)


@pytest.fixture(scope="module")
def engines(repeater):
    """The repeater on an engine with speculation and on one without."""
    both = _engine(repeater, "ngram"), _engine(repeater, "off")
    yield both
    for each in both:
        each.shutdown()


async def _tokens(engine, sampling: Sampling, start: list[int] | None = None) -> list:
    """A reply's tokens (with their probabilities where asked for); after `start`, with `start` given."""
    history = [{"role": "user", "content": "广州广州广州"}]
    if start is None:
        events = [event async for event in engine.reply("你是导游", history, sampling)]
    else:
        opened = engine.reply("你是导游", history, sampling)
        prompt = await anext(opened)
        await opened.aclose()
        events = [event async for event in engine.continue_reply(prompt, start, sampling)][1:]  # past `start`
    return [token for event in events if isinstance(event, TextDelta) for token in (event.logprobs or event.token_ids)]


async def test_greedy_replies_take_the_models_likeliest_token_at_every_step(engines):
    speculating, plain = engines
    assert await asyncio.wrap_future(speculating._submit(speculating._llm.collective_rpc("install_rejection_kernels"))
                                     ) == [True]
    sampling = Sampling(0.0, 1.0, 64, ignore_eos=True, logprobs=5)
    tokens, alone = await _tokens(speculating, sampling), await _tokens(plain, sampling)
    # Proposed or not, each token comes with the model's own probabilities, and greedy took the likeliest
    # (up to a tie in bfloat16, where a batched check may round the other way).
    assert all(token.logprob >= token.top[0][2] - 1e-2 for token in tokens)
    first_other = next((at for at, (a, b) in enumerate(zip(tokens, alone)) if a.token_id != b.token_id), None)
    assert first_other is None or tokens[first_other].logprob - tokens[first_other].top[1][2] < 0.05  # a near tie
    state = speculating.state()
    assert state.accepted > 20 and state.proposed >= state.accepted  # it proposed, and the model kept most
    assert plain.state().proposed == 0


def test_the_proposers_threads_keep_out_of_the_models(engines):
    """The engine processes start with the variables of this one (vLLM spawns them): numba's own thread pool, as
    its OpenMP layer would share the runtime the model's threads are bound in (`engine_options`)."""
    assert os.environ.get("NUMBA_THREADING_LAYER") == "workqueue"


async def test_sampled_tokens_come_from_the_same_distribution_with_and_without_speculation(engines):
    """After six of the repeater's favourite token the n-gram proposes more of it; at this temperature the model
    repeats it about half the time. The token after the first one drawn is compared, drawn `DRAWS` times each way."""
    speculating, plain = engines
    favourite = (await _tokens(plain, Sampling(0.0, 1.0, 1)))[0]
    sampling = Sampling(0.25, 1.0, 6 + POSITION + 1, ignore_eos=True)

    async def draws(chat_engine) -> collections.Counter:
        limit = asyncio.Semaphore(8)

        async def one() -> int:
            async with limit:
                return (await _tokens(chat_engine, sampling, [favourite] * 6))[POSITION]
        return collections.Counter(await asyncio.gather(*(one() for _ in range(DRAWS))))

    before = speculating.state().accepted
    speculated, alone = await draws(speculating), await draws(plain)
    assert speculating.state().accepted - before > DRAWS // 2  # many of the compared tokens went through the check
    # Two-sample chi-square over the tokens drawn at least 10 times in all, the rest as one.
    common = [token for token in speculated | alone if speculated[token] + alone[token] >= 10]
    rows = torch.tensor([[counts[token] for token in common] + [DRAWS - sum(counts[token] for token in common)]
                         for counts in (speculated, alone)], dtype=torch.float64)
    rows = rows[:, rows.sum(0) > 0]
    expected = rows.sum(1, keepdim=True) * rows.sum(0, keepdim=True) / rows.sum()
    statistic = ((rows - expected) ** 2 / expected).sum()
    freedom = rows.shape[1] - 1
    assert freedom >= 2  # the tokens spread over several values: a test that can tell distributions apart
    p_value = torch.special.gammaincc(torch.tensor(freedom / 2, dtype=torch.float64), statistic / 2)
    assert p_value > 0.001, (speculated.most_common(6), alone.most_common(6))
