"""The daily limit per user (`CHAT_DAILY_TOKENS_PER_USER`): a logged-in user's tokens in and out of today's stored
replies, counted before each question. Past the limit the question is not answered, and the user is told in plain
words when the day's allowance comes back (midnight, this server's time). A running reply is never cut: it is
counted once stored, so the question that crosses the limit is answered in full.
"""

from __future__ import annotations

import asyncio
from datetime import date, datetime, time, timedelta

from insights.usage import tokens_today


async def over_limit(database, limit: int | None, user: str | None) -> str | None:
    """What to tell `user` when today's tokens have reached `limit`; None while they may ask (or without a limit
    or a login)."""
    if not limit or not user:
        return None
    spent = await asyncio.to_thread(tokens_today, database, user)
    if spent < limit:
        return None
    reset = datetime.combine(date.today() + timedelta(days=1), time.min)
    return (f"⏳ 今天的额度已用完（已用 {spent} 个词元，每天 {limit} 个），{reset:%m月%d日 %H:%M}（服务器时间）后可以继续提问。"
            f"\n\nYou have used today's allowance ({spent} of {limit} tokens a day). You can ask again from "
            f"{reset:%H:%M on %d %B} (server time).")
