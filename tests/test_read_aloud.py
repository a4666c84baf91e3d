"""What Read aloud hands the browser's speech synthesis: the reply's words without Markdown marks, in its language."""

from __future__ import annotations

import pytest

from ui.read_aloud import speech

pytestmark = pytest.mark.fast


def test_markdown_marks_are_not_read_and_links_read_as_their_text():
    reply = "## 推荐路线\n\n- **陈家祠**：岭南建筑\n- 详见 [官网](https://example.com)\n\n| 景点 | 区 |\n|---|---|\n| 广州塔 | 海珠 |"
    said = speech(reply)
    assert said == {"text": "推荐路线\n陈家祠：岭南建筑\n详见 官网\n景点 区\n广州塔 海珠", "lang": "zh-CN"}


@pytest.mark.parametrize("reply, lang", [
    ("The Canton Tower (广州塔) is 600 metres tall.", "en-US"),  # an English reply names places in Chinese
    ("广州塔高600米，可以乘坐 Bubble Tram 摩天轮。", "zh-CN"),  # a Chinese one may name a thing in English
    ("Chen Clan Academy 在荔湾区。", "zh-CN"),
])
def test_the_language_is_the_replys_own(reply, lang):
    assert speech(reply)["lang"] == lang
