"""The places a knowledge base knows, for checking the places a reply names: the districts and metro stations its
entries give in their district and station fields ("- 所在区：海珠区，…", "- 最近地铁站：广州塔站（3号线、APM线）"), and the
name of every entry that gives one (a sight's: 广州塔, 陈家祠). Read from the fields, not from running text, where
"度假区" or "地铁站" are words, not places.
"""

from __future__ import annotations

import re

_FIELD = re.compile(r"^[ \t]*[-*+]?[ \t]*[^\n:：]{0,8}(?:区|地铁站)[ \t]*[:：](.*)$", re.MULTILINE)
_PLACE = re.compile(r"[\u4e00-\u9fff]{1,6}[区站]")
_BETWEEN = re.compile(r"[^\u4e00-\u9fff]+|号?线|与|和|或|及")


def places(text: str) -> set[str]:
    """The districts and stations given in the district and station fields of `text`."""
    return {piece for value in _FIELD.findall(text) for piece in _BETWEEN.split(value) if _PLACE.fullmatch(piece)}


def sight(title: str) -> str:
    """An entry's name from its title: without what brackets add ("陈家祠（广东民间工艺博物馆）" is 陈家祠); none for a title
    that names a topic ("推荐路线：经典一日游")."""
    return "" if re.search("[：:]", title) else re.split(r"[（(]", title)[0].strip()
