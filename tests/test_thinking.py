"""Thinking models: the template's switch, which of vLLM's reasoning parsers a reply needs, a reply's recorded
deltas split by it wherever `<think>` and `</think>` fall, and the real engine on a tiny Qwen3 model that thinks
(`tests/tiny_model.build_tiny_thinker`): its thinking and its answer come apart, token for token."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from engine.api import Finished, ReplyStats, Sampling, TextDelta
from engine.prompt import RenderedPrompt
from engine.thinking import ThinkingSplitter, has_switch, parser_name, split_thinking, splitter_for
from tests.tiny_model import build_tiny_qwen, build_tiny_thinker

R1_TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content.split('</think>')[-1] }}"
               "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")
STATS = ReplyStats(prompt_tokens=1)


@pytest.fixture(scope="module")
def thinker(tmp_path_factory) -> tuple:
    folder = build_tiny_thinker(tmp_path_factory.mktemp("models") / "thinker")
    return folder, AutoTokenizer.from_pretrained(folder), json.loads((folder / "script.json").read_text())


def recorded(tokenizer, text: str, cuts: list[int]) -> list[TextDelta]:
    """`text` as vLLM streams it, cut into deltas after the given token counts: a character whose bytes are not
    all there yet waits for the next delta, as vLLM's detokenizer holds it back."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    bounds = [0, *cuts, len(ids)]
    texts = [tokenizer.decode(ids[:end]).rstrip("\ufffd") for end in bounds]
    return [TextDelta(texts[index + 1][len(texts[index]):], STATS, token_ids=tuple(ids[start:end]))
            for index, (start, end) in enumerate(zip(bounds, bounds[1:]))]


def split_all(splitter: ThinkingSplitter, deltas: list[TextDelta]) -> tuple[str, str]:
    parts = [part for delta in deltas for part in splitter.split(delta)] + splitter.finish(deltas[-1])
    return ("".join(part.text for part in parts if part.kind == "thinking"),
            "".join(part.text for part in parts if part.kind == "answer"))


def prompt_for(tokenizer, thinking: bool, template: str | None = None) -> RenderedPrompt:
    text = tokenizer.apply_chat_template([{"role": "user", "content": "你好"}], chat_template=template, tokenize=False,
                                         add_generation_prompt=True, enable_thinking=thinking)
    return RenderedPrompt(text, tokenizer.encode(text, add_special_tokens=False), 0)


@pytest.mark.fast
def test_only_a_template_with_the_switch_offers_it(thinker, tmp_path):
    assert has_switch(thinker[0])
    assert not has_switch(build_tiny_qwen(tmp_path / "qwen25"))
    assert not has_switch(tmp_path / "missing")


@pytest.mark.fast
def test_the_parser_follows_the_template_and_the_switch(thinker):
    _, tokenizer, _ = thinker
    template = tokenizer.chat_template
    assert parser_name(template, prompt_for(tokenizer, True).text, thinking=True) == "qwen3"
    assert parser_name(template, prompt_for(tokenizer, False).text, thinking=False) is None  # empty think block
    assert parser_name(R1_TEMPLATE, prompt_for(tokenizer, False, R1_TEMPLATE).text, thinking=False) == "deepseek_r1"
    assert parser_name("{{ messages }}", "<|im_start|>assistant\n", thinking=True) is None


@pytest.mark.fast
@pytest.mark.parametrize("cuts", [[1], [3], [5, 6], [6, 7], [1, 2, 3, 4, 5, 6, 7, 8, 9], [9]])
def test_qwen3_deltas_split_wherever_the_tags_fall(thinker, cuts):
    """Cut after `<think>`, inside the thinking, right before and after `</think>`, token by token, and with
    `</think>` and answer text in one delta."""
    _, tokenizer, _ = thinker
    deltas = recorded(tokenizer, "<think>\n嗯，我想想。</think>\n\n广州塔很高。", cuts)
    splitter = ThinkingSplitter(tokenizer, "qwen3", prompt_for(tokenizer, True).token_ids)
    thinking, answer = split_all(splitter, deltas)
    assert "我想想" in thinking and "广州" not in thinking and "think>" not in thinking
    assert answer.strip() == "广州塔很高。"


@pytest.mark.fast
@pytest.mark.parametrize("cuts", [[2], [3, 4], [4], [1, 2, 3, 4, 5, 6]])
def test_r1_deltas_split_when_the_prompt_opened_the_thinking(thinker, cuts):
    _, tokenizer, _ = thinker
    deltas = recorded(tokenizer, "嗯，我想想。</think>广州塔很高。", cuts)
    splitter = ThinkingSplitter(tokenizer, "deepseek_r1", prompt_for(tokenizer, False, R1_TEMPLATE).token_ids)
    thinking, answer = split_all(splitter, deltas)
    assert thinking == "嗯，我想想。" and answer == "广州塔很高。"


@pytest.mark.fast
async def test_the_stream_splits_and_ends_with_its_statistics(thinker):
    _, tokenizer, _ = thinker

    async def events():
        for delta in recorded(tokenizer, "<think>想一想</think>好的", [2, 4]):
            yield delta
        yield Finished(STATS)

    prompt = prompt_for(tokenizer, True)
    split = [event async for event in split_thinking(events(), splitter_for(tokenizer, prompt, True))]
    assert isinstance(split[-1], Finished)
    assert "".join(event.text for event in split[:-1] if event.kind == "thinking") == "想一想"
    assert "".join(event.text for event in split[:-1] if event.kind == "answer").strip() == "好的"


async def test_the_real_engine_splits_a_thinking_models_reply(thinker):
    """vLLM runs the tiny Qwen3 thinker: its thinking comes as thinking deltas, its answer as answer deltas, and
    with thinking off the template's empty think block goes in the prompt and nothing is parsed."""
    from config.settings import load_settings
    from engine.vllm_engine import VllmEngine

    folder, _, script = thinker
    settings = load_settings({"CHAT_MODEL": str(folder), "CHAT_KV_CACHE_GIB": "1", "CHAT_MAX_MODEL_LEN": "2048"})
    engine = VllmEngine.load(settings, folder)
    try:
        on = [event async for event in engine.reply("你是导游", [{"role": "user", "content": "你好"}],
                                                    Sampling(0.0, 1.0, 100, thinking=True))]
        off = [event async for event in engine.reply("你是导游", [{"role": "user", "content": "你好"}],
                                                     Sampling(0.0, 1.0, 100, thinking=False))]
    finally:
        engine.shutdown()
    deltas = [event for event in on if isinstance(event, TextDelta)]
    assert "".join(delta.text for delta in deltas if delta.kind == "thinking").strip() == script["thinking"]
    assert "".join(delta.text for delta in deltas if delta.kind == "answer").strip() == script["answer"]
    assert isinstance(on[-1], Finished) and on[-1].stats.finish_reason == "stop"
    assert off[0].text.endswith("<think>\n\n</think>\n\n")
    assert all(event.kind == "answer" for event in off if isinstance(event, TextDelta))
