"""End to end: `chainlit run app.py`, driven by Playwright in Debian's Chromium: a reply streams, stops, runs beside
others and ends with its tab; the teaching view's prompt, tokens and branches.

One app on the paced test model serves these tests (session fixture `app`).
"""

from __future__ import annotations

import re
import time

import pytest

from harness.browser import (
    RECORD_STATS,
    REPLY,
    ask_and_wait,
    open_chat,
    send,
    set_option,
    set_slider,
    socket_events,
    wait_until,
)
from history.conversation import model_text
from tests.support import ARTIFACTS

pytestmark = pytest.mark.e2e


RECORD_REPLY_LENGTHS = """
window.replyLengths = [];
window.endlessAnimations = {};  // name: at how many of the reply's lengths it was running
new MutationObserver(() => {
    const replies = document.querySelectorAll('%s');
    if (replies.length) {
        const text = replies[replies.length - 1].innerText;
        if (text.length !== window.replyLengths.at(-1)) {
            window.replyLengths.push(text.length);
            window.replyLast = text;
            const endless = window.endlessAnimations;
            for (const animation of document.getAnimations())
                if (animation.effect.getTiming().iterations === Infinity && animation.playState === "running")
                    endless[animation.animationName] = (endless[animation.animationName] || 0) + 1;
        }
    }
}).observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
""" % REPLY


def test_reply_streams_into_the_page(browser, app):
    page = open_chat(browser, app, RECORD_REPLY_LENGTHS)
    set_option(page, "knowledge", False)  # the reply alone, without a sources line added at its end
    send(page, "推荐三个广州的景点")
    page.wait_for_selector(REPLY, timeout=30_000)
    page.wait_for_selector("#chat-submit", timeout=120_000)  # the send button returns when the reply ends
    text = page.locator(REPLY).last.inner_text()
    lengths, last = page.evaluate("[window.replyLengths, window.replyLast]")
    # The reply grew in the page step by step (streamed), rather than appearing whole at the end, into the text the
    # page shows (up to layout whitespace: innerText's line breaks between the footer's buttons follow the styles).
    assert len(lengths) >= 5 and lengths[0] < len(text) / 2, lengths
    assert re.sub(r"\s", "", last) == re.sub(r"\s", "", text), (last, text)
    assert len(text) > 50
    assert not re.search(r"<\|im_(start|end)\|>|<\|endoftext\|>", text)
    # Nothing on the page animates without end while the reply streams (each frame of it would be the model's CPU,
    # public/chat.css): the cursor stays still. (An avatar's placeholder pulses for a moment while its image loads.)
    endless = page.evaluate("window.endlessAnimations")
    assert all(count <= len(lengths) / 2 for count in endless.values()), (endless, len(lengths))
    page.screenshot(path=str(ARTIFACTS / "chat.png"))
    page.close()


def press_stop(page) -> None:
    # A click event on the button itself: Playwright's pointer click first waits for two steady
    # animation frames, which a page re-rendering a 300 tokens/s stream on two cores may not give.
    page.locator("#stop-button").dispatch_event("click")


def test_stop_keeps_the_partial_reply(browser, app):
    page = open_chat(browser, app)
    send(page, "你好")
    page.wait_for_selector(REPLY, timeout=30_000)
    press_stop(page)
    page.wait_for_selector("#chat-submit", timeout=5_000)
    assert wait_until(lambda: "abort" in app.reply_stats()[-1], timeout=5)
    stopped_line = app.reply_stats()[-1]
    assert int(re.search(r"(\d+) generated", stopped_line).group(1)) < 200  # stopped before its budget
    time.sleep(1.0)  # tokens already on the wire when stop was pressed may still land
    partial = page.locator(REPLY).first.inner_text()
    time.sleep(2.0)
    assert page.locator(REPLY).first.inner_text() == partial != ""  # nothing more arrives, text stays
    # The next prompt holds the stopped reply: user, partial assistant reply, user.
    shown = page.locator(REPLY).count()  # the stopped reply, and Chainlit's own "Task manually stopped."
    send(page, "继续")
    # Stopped once the reply has begun: a stop before that ends the question's turn with no reply to keep.
    page.wait_for_selector(f"{REPLY} >> nth={shown}", timeout=30_000)
    press_stop(page)
    assert wait_until(lambda: app.reply_stats()[-1] != stopped_line)
    assert "in 3 messages" in app.reply_stats()[-1]
    page.close()


def test_four_chats_stream_at_the_same_time(browser, app):
    pages = [open_chat(browser, app, RECORD_STATS) for _ in range(4)]
    for index, page in enumerate(pages):
        send(page, f"第{index + 1}个问题：推荐广州的景点")
    for page in pages:
        page.wait_for_selector(REPLY, timeout=30_000)
        page.wait_for_selector("#chat-submit", timeout=120_000)
    # Interleaved: every chat received deltas before every other chat had received its last one.
    spans = [[at for at, event in socket_events(page, "stream_token") if event.get("token")] for page in pages]
    assert max(times[0] for times in spans) < min(times[-1] for times in spans)
    # The engine's own scheduler ran the four together (its figure, shown in the sidebars).
    running = {values.get("running") for page in pages for values in page.evaluate("window.statHistory")}
    assert "4" in running, running
    for page in pages:
        page.close()


def test_closing_the_tab_aborts_the_reply(browser, app):
    page = open_chat(browser, app)
    replies_before = len(app.reply_stats())
    send(page, "介绍一下广州塔")
    page.wait_for_selector(REPLY, timeout=30_000)
    page.close()
    closed = time.monotonic()
    assert wait_until(lambda: len(app.reply_stats()) > replies_before, timeout=10)
    line = app.reply_stats()[-1]
    assert "abort" in line and int(re.search(r"(\d+) generated", line).group(1)) < 200, line
    assert time.monotonic() - closed < 5
    assert re.search(r"Request chat-\d+ aborted after \d+ tokens", app.log())
    # vLLM's own scheduler, as a new visitor's sidebar shows it: nothing is generating for nobody.
    observer = open_chat(browser, app)
    observer.wait_for_selector('[data-stat="running"]', timeout=30_000)
    assert observer.locator('[data-stat="running"]').inner_text() == "0"
    observer.close()


def test_two_sessions_share_one_engine(browser, app):
    pages = [open_chat(browser, app) for _ in range(2)]
    for page, question in zip(pages, ("广州早茶吃什么", "What is the Canton Tower?")):
        send(page, question)
    for page in pages:
        page.wait_for_selector(REPLY, timeout=30_000)
        page.wait_for_selector("#chat-submit", timeout=120_000)
    texts = [page.locator(REPLY).last.inner_text() for page in pages]
    assert all(texts) and texts[0] != texts[1]  # each session got the reply to its own question
    cores = [proc for proc in app.engine_processes() if "EngineCore" in " ".join(proc.cmdline())]
    assert len(cores) == 1
    assert app.log().count("Engine ready") == 1
    for page in pages:
        page.close()


def test_teaching_view_shows_the_exact_prompt(browser, app, paced_model_dir):
    from transformers import AutoTokenizer

    page = open_chat(browser, app)
    set_option(page, "teaching", True)
    ask_and_wait(page, "你好")
    steps = [step for _, step in socket_events(page, "update_message") if step["name"] == "提示词 Prompt"]
    assert steps, "no prompt step was sent"
    output = steps[-1]["output"]
    prompt_text = output.split("```text\n", 1)[1].rsplit("\n```", 1)[0]
    # the question last, after the passages the knowledge base found for it (tests/test_knowledge.py)
    assert prompt_text.startswith("<|im_start|>system\n") and prompt_text.endswith("\n你好<|im_end|>\n<|im_start|>assistant\n")
    tokens = len(AutoTokenizer.from_pretrained(paced_model_dir).encode(prompt_text))
    assert f"**{tokens} tokens** · temperature 0.0 · top_p 0.8 · top_k 20" in output
    page.get_by_text("提示词 Prompt").first.click()  # collapsed by default; a click opens it
    page.wait_for_selector("text=<|im_start|>assistant", timeout=10_000)
    page.close()


TOKENS = "[data-token-view] [data-token-id]"
READ_TOKENS = "spans => spans.map(span => [Number(span.dataset.tokenId), Number(span.dataset.prob), Number(span.dataset.modelProb)])"
READ_ALTERNATIVES = ("rows => rows.map(row => [Number(row.dataset.alternativeId), Number(row.dataset.prob), "
                     "Number(row.dataset.modelProb)])")


def test_teaching_view_shows_a_replys_tokens_with_their_probabilities(browser, app, paced_model_dir):
    """A teacher turns the teaching view on, sees the reply's tokens coloured, opens a token's alternatives, and
    sees what temperature does to them."""
    from transformers import AutoTokenizer

    page = open_chat(browser, app)
    set_option(page, "teaching", True)
    ask_and_wait(page, "广州")
    page.wait_for_selector(TOKENS, timeout=10_000)
    shown = page.locator("[data-token-view]").last.locator("[data-token-id]").evaluate_all(READ_TOKENS)
    reply_text = [step["output"] for _, step in socket_events(page, "update_message")
                  if step["type"] == "assistant_message" and step["output"]][-1]
    reply_text = model_text(reply_text)
    tokenizer = AutoTokenizer.from_pretrained(paced_model_dir)
    # the reply as shown starts at its first word (`chat.stream`), its tokens as the model wrote them (" flowers")
    assert tokenizer.decode([token for token, _, _ in shown]).lstrip() == reply_text and len(shown) == 200
    assert all(0 < model <= 1 for _, _, model in shown)
    assert all(prob == 1 for _, prob, _ in shown)  # greedy: the chosen token had it all
    page.locator("[data-token-view]").last.locator("[data-token-id]").nth(3).click()
    alternatives = page.locator("[data-alternatives] [data-alternative-id]").evaluate_all(READ_ALTERNATIVES)
    assert len(alternatives) == 5 and shown[3][0] in [token for token, _, _ in alternatives]
    assert [model for _, _, model in alternatives] == sorted((model for _, _, model in alternatives), reverse=True)
    page.screenshot(path=str(ARTIFACTS / "tokens.png"))

    # The prompt's tokens, in the prompt step: its ids, the template's special tokens marked.
    page.get_by_text("提示词 Prompt").first.click()  # the step opens
    page.wait_for_selector("[data-token-view] [data-special]", timeout=10_000)
    prompt_tokens = page.locator("[data-token-view]").first.locator("[data-token-id]").evaluate_all(
        "spans => spans.map(span => [Number(span.dataset.tokenId), span.dataset.special !== undefined])")
    output = [step for _, step in socket_events(page, "update_message") if step["name"] == "提示词 Prompt"][-1]["output"]
    prompt_text = output.split("```text\n", 1)[1].rsplit("\n```", 1)[0]
    assert [token for token, _ in prompt_tokens] == tokenizer.encode(prompt_text)
    assert {token for token, special in prompt_tokens if special} == {
        tokenizer.convert_tokens_to_ids(marker) for marker in ("<|im_start|>", "<|im_end|>")}
    page.click("[data-weigh-prompt]")  # their probabilities, on request: one prefill
    page.wait_for_selector("[data-token-view] [data-special][data-model-prob]", timeout=30_000)
    weighed = page.locator("[data-token-view]").first.locator("[data-token-id]").evaluate_all(
        "spans => spans.map(span => span.dataset.modelProb)")
    assert weighed[0] is None and all(0 < float(prob) <= 1 for prob in weighed[1:])

    # Temperature 1.5 (the slider, 30 steps of 0.05): the sampling's probabilities now differ from the model's.
    set_slider(page, "temperature", 30)
    ask_and_wait(page, "白云山")
    sampled = page.locator("[data-token-view]").last.locator("[data-token-id]")
    chances = [prob for _, prob, _ in sampled.evaluate_all(READ_TOKENS)]
    uncertain = next(index for index, prob in enumerate(chances) if 0 < prob < 1)  # a token drawn among several
    sampled.nth(uncertain).click()
    hot = page.locator("[data-alternatives] [data-alternative-id]").evaluate_all(READ_ALTERNATIVES)
    assert sum(prob > 0 for _, prob, _ in hot) >= 2 and any(abs(prob - model) > 0.01 for _, prob, model in hot)
    page.screenshot(path=str(ARTIFACTS / "tokens-hot.png"))
    page.close()


def test_choosing_another_token_branches_the_reply_from_there(browser, app, paced_model_dir):
    """A teacher opens a token's alternatives and picks the second likeliest: a branch below continues the reply
    from that token, and the conversation can keep either."""
    from transformers import AutoTokenizer

    page = open_chat(browser, app)
    set_option(page, "teaching", True)
    ask_and_wait(page, "珠江")
    view = page.locator("[data-token-view]:not([data-branch-from])").last
    original = view.locator("[data-token-id]").evaluate_all("spans => spans.map(span => Number(span.dataset.tokenId))")
    view.locator("[data-token-id]").nth(4).click()
    button = page.locator("[data-alternatives] [data-force-token]").nth(1)  # greedy took the first
    chosen = int(button.get_attribute("data-force-token"))
    assert chosen != original[4]
    button.click()
    page.wait_for_selector("[data-token-view][data-branch-from='4']", timeout=60_000)
    page.wait_for_selector("#chat-submit", timeout=180_000)
    branch = [step for _, step in socket_events(page, "update_message") if "set_aside" in (step.get("metadata") or {})]
    start = AutoTokenizer.from_pretrained(paced_model_dir).decode([*original[:4], chosen])
    assert branch and branch[-1]["output"].startswith(start.lstrip()) and len(branch[-1]["output"]) > len(start)
    page.screenshot(path=str(ARTIFACTS / "tokens-branch.png"))
    replies = [step["id"] for _, step in socket_events(page, "update_message") if "reply" in (step.get("metadata") or {})]
    page.get_by_text("保留这个回答 Keep this reply").last.click()  # the branch takes the original's place
    for _ in range(100):  # and the original gets the button
        if any(action["forId"] == replies[-1] for _, action in socket_events(page, "action")):
            break
        page.wait_for_timeout(100)
    else:
        raise AssertionError("the original reply did not get the keep button")
    page.close()
