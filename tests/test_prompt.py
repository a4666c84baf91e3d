"""Rendering a conversation with the model's own chat template, and dropping the oldest turns to fit."""

import pytest

from config.errors import MessageTooLongError
from engine.prompt import render_prompt
from tests.tiny_model import build_tiny_qwen

pytestmark = pytest.mark.fast

HISTORY = [
    {"role": "user", "content": "你好"},
    {"role": "assistant", "content": "你好！我是导游。"},
    {"role": "user", "content": "推荐三个广州的景点"},
]


def test_exact_chatml_with_one_system_prompt(tiny_tokenizer):
    prompt = render_prompt(tiny_tokenizer, "你是导游", HISTORY, budget=1000)
    assert prompt.text == (
        "<|im_start|>system\n你是导游<|im_end|>\n"
        "<|im_start|>user\n你好<|im_end|>\n"
        "<|im_start|>assistant\n你好！我是导游。<|im_end|>\n"
        "<|im_start|>user\n推荐三个广州的景点<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert prompt.text.count("<|im_start|>system") == 1
    assert prompt.token_ids == tiny_tokenizer.encode(prompt.text, add_special_tokens=False)
    assert prompt.dropped_messages == 0


def test_oldest_turns_dropped_first_keeping_system_and_newest(tiny_tokenizer):
    long_history = []
    for turn in range(10):
        long_history += [{"role": "user", "content": f"问题{turn} " + "景点" * 20},
                         {"role": "assistant", "content": f"回答{turn} " + "早茶" * 20}]
    long_history.append({"role": "user", "content": "最后的问题"})
    full = render_prompt(tiny_tokenizer, "你是导游", long_history, budget=100_000)
    budget = len(full.token_ids) // 2
    prompt = render_prompt(tiny_tokenizer, "你是导游", long_history, budget=budget)
    assert len(prompt.token_ids) <= budget
    assert prompt.dropped_messages > 0 and prompt.dropped_messages % 2 == 0
    assert "你是导游" in prompt.text and "最后的问题" in prompt.text
    assert "问题0" not in prompt.text and "回答9" in prompt.text
    # The most recent turns that fit are kept: one more would not have fitted.
    kept_one_more = render_prompt(tiny_tokenizer, "你是导游", long_history[prompt.dropped_messages - 2:],
                                  budget=100_000)
    assert len(kept_one_more.token_ids) > budget


def test_newest_message_too_long_is_a_clear_error(tiny_tokenizer):
    with pytest.raises(MessageTooLongError, match="too long"):
        render_prompt(tiny_tokenizer, "你是导游", [{"role": "user", "content": "很长" * 500}], budget=200)


def test_instructions_that_leave_no_room_are_not_blamed_on_the_visitors_message():
    from tests.fake_engine import CharacterTokenizer

    with pytest.raises(MessageTooLongError) as refused:
        render_prompt(CharacterTokenizer(), "说明" * 300, [{"role": "user", "content": "你好"}], budget=400)
    assert "lower \"Max new tokens\"" in str(refused.value) and "调低" in str(refused.value)
    with pytest.raises(MessageTooLongError) as refused:
        render_prompt(CharacterTokenizer(), "说明", [{"role": "user", "content": "很长" * 300}], budget=400)
    assert "This message is too long" in str(refused.value) and "这条消息太长" in str(refused.value)


def test_each_persona_must_leave_room_for_a_question_and_a_reply():
    from config.errors import ConfigError
    from engine.prompt import check_fits
    from tests.fake_engine import CharacterTokenizer

    check_fits(CharacterTokenizer(), {"guide": "说明" * 100}, max_model_len=1024, max_new_tokens=512)
    with pytest.raises(ConfigError, match="'guide' needs 292 tokens.*at least 1092, .*at most 732,") as refused:
        check_fits(CharacterTokenizer(), {"guide": "说明" * 100}, max_model_len=1024, max_new_tokens=800)
    assert "\n" not in str(refused.value)


def test_template_options_reach_the_template(tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(build_tiny_qwen(tmp_path / "qwen3", thinking_template=True))
    history = [{"role": "user", "content": "hi"}]
    off = render_prompt(tokenizer, "sys", history, 1000, {"enable_thinking": False})
    on = render_prompt(tokenizer, "sys", history, 1000, {"enable_thinking": True})
    assert off.text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert on.text.endswith("<|im_start|>assistant\n")
