"""Chat settings (⚙): limits checked on the server, refusals explained, changes applied to the next reply."""

import asyncio
import math
from dataclasses import replace

from chat.chat_options import ChatOptions, checked, compared, initial_options, label, limits, sampling, widgets
from config.settings import load_settings
from harness.browser import wait_until
from harness.visitor import ChatClient
from retrieval.grounding import grounded
from retrieval.index import Found

SETTINGS = load_settings({})


def test_values_within_limits_are_taken_and_the_rest_refused_with_what_was_kept():
    previous = initial_options(SETTINGS)
    options, refused = checked(SETTINGS, previous, {"temperature": 1.2, "top_p": 0.5, "max_new_tokens": 64,
                                                    "teaching": True, "live_stats": False, "thinking": True,
                                                    "knowledge": False, "compare": True, "compare_temperature": 0,
                                                    "compare_seed": 42.0})
    assert options == ChatOptions(temperature=1.2, top_p=0.5, max_new_tokens=64, teaching=True, live_stats=False,
                                  thinking=True, knowledge=False, compare=True, compare_temperature=0, compare_seed=42)
    assert isinstance(options.compare_seed, int)
    assert refused == []
    options, refused = checked(SETTINGS, previous, {"temperature": 5, "top_p": "lots", "max_new_tokens": -3})
    assert options == previous and len(refused) == 3
    assert "5 is outside 0–2; 0.7 is kept" in refused[0] and "'lots'" in refused[1]
    assert checked(SETTINGS, previous, {"temperature": math.nan})[0] == previous
    options, refused = checked(SETTINGS, previous, {"knowledge": "off"})  # a switch takes true or false only
    assert options == previous and "'off' is not on or off" in refused[0]


def test_thinking_is_offered_only_where_the_template_has_the_switch_and_reaches_the_sampling():
    offered = lambda switch: [widget.id for widget in widgets(SETTINGS, initial_options(SETTINGS), switch)]
    assert "thinking" in offered(True) and "thinking" not in offered(False)
    assert initial_options(SETTINGS).thinking is SETTINGS.enable_thinking
    assert sampling(SETTINGS, replace(initial_options(SETTINGS), thinking=True)).thinking


def test_compare_samples_the_second_reply_at_its_own_temperature_and_seed_and_says_so():
    options = replace(initial_options(SETTINGS), compare=True, compare_temperature=1.2, compare_seed=7)
    first = sampling(SETTINGS, options)
    second = compared(first, options)
    assert (second.temperature, second.seed) == (1.2, 7) and replace(second, temperature=first.temperature,
                                                                      seed=None) == first
    assert compared(first, replace(options, compare_seed=0)).seed is None  # 0: a new draw each time
    assert "seed 7" in label(second) and "the same question gets the same reply" in label(second)
    assert "the same every time" in label(replace(first, temperature=0))
    assert [widget.id for widget in widgets(SETTINGS, options, False)][-3:] == ["compare", "compare_temperature",
                                                                               "compare_seed"]


def test_a_reply_ends_where_it_starts_writing_out_its_prompt():
    """Seen at the defaults on both demo models: an answer, then its prompt's passages and question again (436 tokens
    on a phone). The app's sampling ends a reply at the layout its prompt has, and not at a reply's own words."""
    found = [Found("k/广州塔.md", "广州塔", "简介", "广州塔总高度 600 米。", 1.0)]
    prompt = grounded([{"role": "user", "content": "广州塔有多高？"}], found)[-1]["content"]
    stop = sampling(SETTINGS, initial_options(SETTINGS)).stop
    for answer in ("广州塔高 600 米。\n\n", "The Canton Tower (广州塔) is 600 m tall. "):
        for echo in (prompt, prompt[prompt.index("【问题】"):]):
            written = answer + echo
            assert written[:min(written.index(text) for text in stop if text in written)] == answer
    assert not any(text in "根据【参考资料】，广州塔高 600 米。【问题】是高度。" for text in stop)


def test_the_reply_budget_leaves_room_for_the_prompt():
    assert limits(SETTINGS)["max_new_tokens"].high == SETTINGS.max_model_len // 2


def test_a_crafted_client_cannot_pass_values_out_of_range(app):
    """The browser's sliders stay in range; a client sending its own values is refused on the server."""

    async def scenario() -> list[str]:
        client = ChatClient(app.url)
        await client.connect()
        await client.socket.emit("chat_settings_change", {"temperature": 5, "top_p": 0.5, "max_new_tokens": 99999,
                                                          "live_stats": False, "teaching": False})
        await client.ask("你好")
        await asyncio.wait_for(client.done.wait(), 120)
        await client.socket.disconnect()
        return [message["output"] for message in client.messages if message["type"] == "assistant_message"]

    replies_before = len(app.reply_stats())
    messages = asyncio.run(scenario())
    assert any("5 is outside 0–2; 0 is kept" in text and "99999 is outside" in text for text in messages), messages
    assert wait_until(lambda: len(app.reply_stats()) > replies_before)
    # The app's own values (temperature 0, 200 tokens) stayed; the valid top_p was taken.
    assert app.reply_stats()[-1].startswith("Reply: temperature 0, top_p 0.5, max 200 new tokens;")
