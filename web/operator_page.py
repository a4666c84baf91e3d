"""The operator's page as HTML: a period's figures, the unanswered questions, the documents by use and, with logins,
the users; in Chinese, or in English where the browser asks for it first. Charts are SVG drawn here, emoji drawn with
the app's own Noto Emoji; nothing comes from elsewhere (no scripts, no outside fonts), so the page works offline.
"""

from __future__ import annotations

import html
from urllib.parse import urlencode

from insights.report import Report
from insights.unanswered import REASONS
from insights.usage import Tally
from web.operator_forms import FORM_STYLE, Desk, activity_section, answer_form, documents_section, try_section, words

TEXT = {  # (Chinese, English)
    "title": ("运营者视图", "Operator's view"),
    "period": ("时间段", "Period"), "today": ("今天", "Today"), "7": ("7 天", "7 days"), "30": ("30 天", "30 days"),
    "365": ("一年", "A year"),
    "from": ("从", "From"), "until": ("到（不含）", "until (excluded)"), "show": ("查看", "Show"),
    "questions": ("提问", "questions"), "chats": ("对话", "chats"), "users": ("用户", "users"),
    "stopped": ("中途停止", "stopped"), "thumbs_up": ("好评", "thumbs up"), "thumbs_down": ("差评", "thumbs down"),
    "tokens_in": ("输入词元", "tokens in"), "tokens_out": ("输出词元", "tokens out"),
    "first_token": ("首个词元 p50 / p95", "first token p50 / p95"), "reply": ("整段回答 p50 / p95", "reply p50 / p95"),
    "per_day": ("每天的提问", "Questions per day"), "per_hour": ("每小时的提问（本机时间）", "Questions per hour (local)"),
    "per_persona": ("按角色", "Per persona"), "per_model": ("按模型", "Per model"), "per_user": ("按用户", "Per user"),
    "unanswered": ("导览没能回答的问题", "What the guide could not answer"),
    "unanswered_note": ("同一个问题的不同问法算一个；最常问的在前。加入回答它的文档后，这里会标记为已回答。",
                        "One question however it was worded; most asked first. Add a document that answers it and it is "
                        "marked answered here."),
    "asked": ("次数", "asked"), "question": ("问题", "question"), "reasons": ("原因", "why"),
    "wordings": ("其他问法", "other wordings"), "last": ("最近一次", "last asked"),
    "answered_by": ("现在由此文档回答", "now answered by"), "none": ("没有。", "None."),
    "documents": ("最常用的文档和段落", "Documents and passages used most"), "replies": ("次回答", "replies"),
    "never": ("从未用到的文档", "Documents never used"), "downloads": ("下载", "Downloads"),
    "keeps": ("保存：", "Kept: "), "keeps_all": ("所有对话（CHAT_HISTORY_DAYS 未设置）",
                                              "every conversation (CHAT_HISTORY_DAYS not set)"),
    "keeps_days": ("闲置超过 {} 天的对话会被删除，统计也随之减少", "conversations idle over {} days are deleted, and "
                   "drop out of these figures"),
    "privacy": ("页面只显示问题，不显示提问者", "The page shows questions, never who asked them"),
    "sign_out": ("退出", "Sign out"),
}


def page(figures: Report, period: dict[str, str], english: bool, keep_days: int, logins: bool, desk: Desk) -> str:
    """`desk`: what the forms show."""
    def t(key: str) -> str:
        return TEXT[key][english]

    form_words = words(english)

    usage = figures.usage
    total = usage.total
    cards = "".join(f'<div class="card"><b>{value}</b>{t(key)}</div>' for key, value in (
        ("questions", total.questions), ("chats", total.chats), *((("users", total.users),) if logins else ()),
        ("stopped", total.stopped), ("thumbs_up", total.thumbs_up), ("thumbs_down", total.thumbs_down),
        ("tokens_in", total.tokens_in), ("tokens_out", total.tokens_out),
        ("first_token", _pair(usage.first_token_s)), ("reply", _pair(usage.reply_s))))
    kept = t("keeps_days").format(keep_days) if keep_days else t("keeps_all")
    query = urlencode(period)
    downloads = " · ".join(f'<a href="/operator/{kind}.{form}?{query}" download>{kind}.{form}</a>'
                           for kind in ("unanswered", "usage", "documents", *(("users",) if logins else ()))
                           for form in ("csv", "json"))
    sections = [
        f'<section data-operator-unanswered><h2>{t("unanswered")}</h2><p class="note">{t("unanswered_note")}</p>'
        f'{_unanswered(figures, t, desk.form_token, form_words)}</section>',
        documents_section(desk, form_words),
        try_section(desk, form_words),
        f'<section class="charts"><div><h2>{t("per_day")}</h2>'
        f'{_bars([(day, tally.questions) for day, tally in usage.days.items()])}</div>'
        f'<div><h2>{t("per_hour")}</h2>{_bars([(f"{hour:02d}", count) for hour, count in enumerate(usage.hours)])}'
        f'</div></section>',
        f'<section><h2>{t("documents")}</h2>{_documents(figures, t)}</section>',
        f'<section><h2>{t("per_persona")}</h2>{_tallies(usage.personas, t, logins)}'
        f'<h2>{t("per_model")}</h2>{_tallies(usage.models, t, logins)}</section>',
        *([f'<section data-operator-users><h2>{t("per_user")}</h2>{_tallies(usage.users, t, logins)}</section>']
          if logins else []),
        activity_section(desk, form_words),
    ]
    return f"""<!doctype html>
<html lang="{'en' if english else 'zh-CN'}"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>{t("title")}</title>
<link rel="stylesheet" href="/public/vendor/noto-emoji/noto-emoji.css">
<style>{STYLE}{FORM_STYLE}</style></head>
<body data-operator-page>
<header><h1>{t("title")}</h1>{_period_form(period, t)}
<form method="post" action="/operator/sign-out" data-operator-sign-out><button>{t("sign_out")}</button></form></header>
<p class="note">{html.escape(usage.since)} – {html.escape(usage.until)} ({t("until")}) · {t("keeps")}{kept}
{'' if logins else ' · ' + t("privacy")}</p>
<div class="cards">{cards}</div>
{''.join(sections)}
<footer>{t("downloads")}: {downloads}</footer>
</body></html>"""


def _pair(values: dict[str, float | None]) -> str:
    return " / ".join("–" if value is None else f"{value:.2f} s" for value in values.values())


def _period_form(period: dict[str, str], t) -> str:
    links = " ".join(f'<a href="/operator?days={days}"{" class=on" if period.get("days") == days else ""}>'
                     f'{t("today" if days == "1" else days)}</a>' for days in ("1", "7", "30", "365"))
    return (f'<form method="get" action="/operator">{t("period")}: {links} · {t("from")} '
            f'<input type="date" name="since" value="{html.escape(period.get("since", ""))}"> {t("until")} '
            f'<input type="date" name="until" value="{html.escape(period.get("until", ""))}"> '
            f'<button>{t("show")}</button></form>')


def _unanswered(figures: Report, t, form_token: str, form_words) -> str:
    if not figures.unanswered:
        return f"<p>{t('none')}</p>"
    rows = "".join(
        f'<tr data-unanswered{" data-answered" if group.answered_by else ""}><td>{group.asked}</td>'
        f'<td>{html.escape(group.question)}</td>'
        f'<td>{"<br>".join(f"{REASONS[reason]} ×{count}" for reason, count in group.reasons.items())}</td>'
        f'<td>{"<br>".join(html.escape(wording) for wording in group.wordings[1:])}</td>'
        f'<td>{html.escape(group.last_asked[:16].replace("T", " "))} UTC</td>'
        f'<td>{"✓ " + html.escape(group.answered_by) if group.answered_by else ""}</td>'
        f'<td>{"" if group.answered_by else answer_form(group.question, group.wordings, form_token, form_words)}</td>'
        f'</tr>'
        for group in figures.unanswered[:MAX_ROWS])
    return (f'<table><tr><th>{t("asked")}</th><th>{t("question")}</th><th>{t("reasons")}</th><th>{t("wordings")}</th>'
            f'<th>{t("last")}</th><th>{t("answered_by")}</th><th></th></tr>{rows}</table>')


def _documents(figures: Report, t) -> str:
    used = figures.documents
    rows = "".join(f"<tr><td>{html.escape(name)}</td><td>{count} {t('replies')}</td></tr>"
                   for name, count in list(used.passages.items())[:MAX_ROWS])
    never = "、".join(html.escape(name) for name in used.never) or t("none")
    return f'<table>{rows}</table><h3>{t("never")}</h3><p data-operator-never>{never}</p>'


def _tallies(tallies: dict[str, Tally], t, logins: bool) -> str:
    if not tallies:
        return f"<p>{t('none')}</p>"
    keys = ("questions", "chats", *(("users",) if logins else ()), "stopped", "thumbs_up", "thumbs_down", "tokens_in",
            "tokens_out")
    head = "".join(f"<th>{t(key)}</th>" for key in keys)
    rows = "".join(f"<tr><td>{html.escape(name)}</td>" + "".join(f"<td>{getattr(tally, key)}</td>" for key in keys)
                   + "</tr>" for name, tally in tallies.items())
    return f"<table><tr><th></th>{head}</tr>{rows}</table>"


def _bars(values: list[tuple[str, int]]) -> str:
    """A bar chart as SVG: one bar per value, labelled below, its count above."""
    width, height, top = max(24 * len(values), 240), 140, max((count for _, count in values), default=0) or 1
    step = width / max(len(values), 1)
    bars = "".join(
        f'<g><rect x="{index * step + 2:.1f}" y="{110 - 100 * count / top:.1f}" width="{step - 4:.1f}" '
        f'height="{100 * count / top:.1f}"><title>{html.escape(label)}: {count}</title></rect>'
        f'<text x="{index * step + step / 2:.1f}" y="{106 - 100 * count / top:.1f}">{count or ""}</text>'
        f'<text x="{index * step + step / 2:.1f}" y="124" class="label">{html.escape(label[-5:])}</text></g>'
        for index, (label, count) in enumerate(values))
    return f'<svg viewBox="0 0 {width} {height}" role="img">{bars}</svg>'


MAX_ROWS = 200  # the page's tables; the downloads hold every row
STYLE = """
body { font-family: "Noto Sans CJK SC", "Noto Sans SC", sans-serif, "Noto Emoji"; margin: 1.5rem; color: #1f2328; }
header { display: flex; flex-wrap: wrap; gap: 1rem; align-items: baseline; justify-content: space-between; }
h1 { margin: 0; font-size: 1.5rem; } h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
.note { color: #57606a; font-size: .9rem; }
.cards { display: flex; flex-wrap: wrap; gap: .5rem; }
.card { border: 1px solid #d0d7de; border-radius: 8px; padding: .5rem .8rem; min-width: 6rem; }
.card b { display: block; font-size: 1.3rem; }
section { overflow-x: auto; }  /* on a phone the tables scroll sideways, whole */
table { border-collapse: collapse; width: 100%; min-width: 40rem; font-size: .9rem; }
td, th { border-bottom: 1px solid #d0d7de; padding: .3rem .5rem; text-align: left; vertical-align: top; }
tr[data-answered] { color: #57606a; background: #f0fff4; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 1rem; }
svg { width: 100%; height: auto; max-height: 12rem; } rect { fill: #2f81f7; }
svg text { font-size: 9px; text-anchor: middle; fill: #1f2328; } svg text.label { fill: #57606a; }
a.on { font-weight: bold; } footer { margin-top: 2rem; font-size: .9rem; }
"""
