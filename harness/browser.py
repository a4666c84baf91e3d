"""A real Chromium page on the chat, driven as a visitor does: Debian's chromium launched headless with the flags
that let it run here, a chat opened once its session is live, a question sent, a setting changed."""

from __future__ import annotations

import json
import time

REPLY = '[data-step-type="assistant_message"] .message-content'
CHROMIUM = "/usr/bin/chromium"  # Debian's, installed by the set-up
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
# A phone as visitors hold it: an iPhone's screen and browser, touch.
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True,
         "user_agent": "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
                       "Version/17.5 Mobile/15E148 Safari/604.1"}
# The browser's speech synthesis, observed: what the page hands `speechSynthesis.speak` is kept in `window.spoken`
# before the browser speaks it. The voices the browser offers are `VOICES` (headless Chromium here has none).
HEAR_SPEECH = """
window.spoken = [];
speechSynthesis.getVoices = () => VOICES.map(lang => ({lang, name: lang, default: false, localService: true}));
const speak = speechSynthesis.speak.bind(speechSynthesis);
speechSynthesis.speak = utterance => { window.spoken.push({text: utterance.text, lang: utterance.lang}); speak(utterance); };
"""


def hear_speech(voices: tuple[str, ...] = ("zh-CN", "en-US")) -> str:
    """An init script recording what the page hands the browser's speech synthesis, with voices of `voices`."""
    return f"const VOICES = {json.dumps(list(voices))};" + HEAR_SPEECH


# The sidebar's figures (`data-stat`), read once, and recorded at every change of the page.
READ_STATS = "Object.fromEntries([...document.querySelectorAll('[data-stat]')].map(e => [e.dataset.stat, e.innerText]))"
RECORD_STATS = f"""
window.statHistory = [];
new MutationObserver(() => window.statHistory.push({READ_STATS}))
    .observe(document, {{subtree: true, childList: true, characterData: true}});
"""


def launch_chromium(playwright):
    """A headless Chromium from Playwright's sync API."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def open_chat(browser, app, init_script: str | None = None, locale: str = "zh-CN", before_load=None,
              login: tuple[str, str] | None = None, **screen):
    """A new page with the chat loaded and its socket connected (a message sent before is lost).
    `before_load(page)` runs before the page is requested (to route or record its requests); `login` is a
    (name, password) to log in with (each page has cookies of its own); `screen`: Playwright's page options
    (`**PHONE` for a phone)."""
    page = browser.new_page(locale=locale, **screen)
    if init_script:
        page.add_init_script(init_script)
    if before_load:
        before_load(page)
    record_socket(page)
    page.goto(app.url)
    if login:
        page.fill("#email", login[0])
        page.fill("#password", login[1])
        page.click("button[type=submit]")
    wait_for_chat(page)
    return page


def record_socket(page) -> None:
    """Keep (arrival, text) of every socket frame the page receives in `page.frames_received`, stamped by Chromium's
    network stack on the clock of time.monotonic(): the test process learns of a frame later, and later still while
    the engine keeps the cores busy."""
    frames: list[tuple[float, str]] = []
    devtools = page.context.new_cdp_session(page)
    devtools.send("Network.enable")
    devtools.on("Network.webSocketFrameReceived",
                lambda event: frames.append((event["timestamp"], event["response"]["payloadData"])))
    page.frames_received = frames


def wait_for_chat(page) -> None:
    """Until the server has started the chat session of `page` (recorded by `record_socket`): a message sent
    before is lost."""
    frames = page.frames_received

    def chat_started() -> bool:  # the server ran on_chat_start for this socket and ended that task
        starts = [index for index, (_, frame) in enumerate(frames) if '"name":"on_chat_start"' in frame]
        return bool(starts) and any("task_end" in frame for _, frame in frames[starts[0]:])

    deadline = time.monotonic() + 60
    while not chat_started():
        assert time.monotonic() < deadline, "the chat session did not start"
        page.wait_for_timeout(100)
    page.wait_for_selector("#chat-input:not([disabled])", timeout=60_000)


def send(page, text: str) -> None:
    page.fill("#chat-input", text)
    page.click("#chat-submit")


def set_option(page, switch: str, on: bool) -> None:
    """Flip a chat setting in the settings dialog, as a user does."""
    page.click("#chat-settings-open-modal")
    if (page.get_attribute(f"#{switch}", "aria-checked") == "true") != on:
        page.click(f"#{switch}")
    page.click("#confirm")
    page.wait_for_selector(f"#{switch}", state="detached")


def socket_events(page, name: str) -> list[tuple[float, dict]]:
    """The payloads of the socket.io events `name` the page received, with their arrival times."""
    prefix = f'42["{name}",'
    return [(at, json.loads(frame[2:])[1]) for at, frame in page.frames_received if frame.startswith(prefix)]


def ask_and_wait(page, question: str) -> str:
    send(page, question)
    page.wait_for_selector(REPLY, timeout=30_000)
    page.wait_for_selector("#chat-submit", timeout=180_000)
    return page.locator(REPLY).last.inner_text()


def wait_until(condition, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def set_slider(page, slider: str, steps_above_lowest: int) -> None:
    """Move a chat setting's slider in the settings dialog with the keyboard, as a user can: to its lowest, then
    `steps_above_lowest` steps up."""
    page.click("#chat-settings-open-modal")
    thumb = page.locator(f"#{slider} [role=slider]")
    thumb.focus()
    thumb.press("Home")
    for _ in range(steps_above_lowest):
        thumb.press("ArrowRight")
    page.click("#confirm")
    page.wait_for_selector(f"#{slider}", state="detached")
