"""The operator's page's forms as HTML: the documents (upload, replace, delete, restore), "write the answer" under an
unanswered question, "try a question" and its result page, and the activity list. Plain forms posting to the routes
of `web.operator_edits`, no scripts; every text a visitor, a document or an operator wrote is escaped. In Chinese, or
in English where the browser asks for it first.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from urllib.parse import quote

from insights.activity import Change
from retrieval.library import Kept

TEXT = {  # (Chinese, English)
    "docs": ("导览的文档", "The guide's documents"),
    "docs_note": ("上传 Markdown、文本、HTML、PDF 或 Word 文件；保存后立即生效。删除或替换的文件保留 30 天，可以恢复。",
                  "Upload Markdown, text, HTML, PDF or Word files; they are used as soon as they are saved. A file "
                  "deleted or replaced is kept for 30 days and can be restored."),
    "indexing": ("正在为文档建立索引，稍后刷新页面即可看到全部文档。", "The documents are being indexed for the first time: "
                 "reload the page in a moment to see them all."),
    "choose": ("选择文件", "Files"), "replace": ("替换同名文件", "Replace a file of the same name"),
    "upload": ("上传", "Upload"), "file": ("文件", "file"), "passages": ("段落", "passages"),
    "used": ("被引用", "used by"), "replies": ("次回答", "replies"), "top": ("常见问题", "questions that found it"),
    "delete": ("删除", "Delete"), "unreadable": ("无法读取：", "Cannot be read: "),
    "kept": ("可恢复的文件", "Files that can be restored"), "restore": ("恢复", "Restore"),
    "deleted": ("已删除", "deleted"), "replaced": ("已替换", "replaced"),
    "write": ("写答案", "Write the answer"), "title": ("标题", "Title"),
    "names": ("其他问法（每行一个，访客这样问也能找到）", "Other wordings (one per line: found by these too)"),
    "answer": ("答案", "Answer"), "replace_entry": ("替换同名条目", "Replace an entry of this title"), "save": ("保存为导览条目", "Save as an entry of the guide"),
    "try": ("试一个问题", "Try a question"),
    "try_note": ("看看访客会得到什么：找到的段落、模型读到的内容，以及导游的回答（预览，不计入统计）。",
                 "See what a visitor would get: the passages found, what the model reads and the guide's reply "
                 "(a preview, not counted in the figures)."),
    "ask": ("查看", "Show"), "persona": ("角色", "Persona"),
    "activity": ("操作记录", "Activity"), "when": ("时间 (UTC)", "time (UTC)"), "who": ("运营者", "operator"),
    "what": ("操作", "action"), "none": ("没有。", "None."),
    "upload_a": ("上传", "upload"), "replace_a": ("替换", "replace"), "delete_a": ("删除", "delete"),
    "restore_a": ("恢复", "restore"), "answer_a": ("写答案", "answer"),
    "found": ("找到的段落", "Passages found"), "reads": ("模型读到的内容", "What the model reads"),
    "app_says": ("这些段落回答不了这个问题：应用会直接这样回复（不问模型）", "The passages do not answer it: the app replies "
                 "so itself (the model is not asked)"),
    "see_reply": ("看导游的回答", "See the guide's reply"),
    "preview": ("预览：导游的回答（不计入统计，不保存）", "Preview: the guide's reply (not counted, not stored)"),
    "back": ("返回运营者视图", "Back to the operator's view"), "no_passage": ("没有找到段落。", "No passage found."),
    "outcome": ("结果", "Outcome"), "saved": ("已保存", "saved"), "not_saved": ("没有保存", "not saved"),
}


@dataclass
class Desk:
    """What the page's forms show besides the figures."""

    documents: list[Listed]
    kept: list[Kept]
    activity: list[Change]
    form_token: str
    personas: list[str]
    indexing: bool  # the documents present at start are still being read for the first time


@dataclass
class Listed:
    """A document of the operators' folder as the guide reads it, and its use in the period."""

    name: str  # within the folder
    title: str
    unreadable: str  # why it cannot be read, or ""
    passages: list[tuple[str, str]]  # (section, text)
    replies: int
    questions: list[tuple[str, int]]  # the questions whose replies drew on it most
    removable: bool  # directly in the folder (the page changes those; subfolders are the operator's own)


def words(english: bool):
    return lambda key: TEXT[key][english]


def documents_section(desk: Desk, t) -> str:
    csrf = _csrf(desk.form_token)
    rows = "".join(_document_row(document, csrf, t) for document in desk.documents)
    kept = "".join(
        f'<tr data-kept><td>{html.escape(item.name)}</td><td>{t(item.why)} {html.escape(item.left[:16].replace("T", " "))}'
        f' UTC</td><td><form method="post" action="/operator/restore/{quote(item.id)}">{csrf}'
        f'<button data-restore>{t("restore")}</button></form></td></tr>' for item in desk.kept)
    indexing = f'<p class="problem" data-indexing>{t("indexing")}</p>' if desk.indexing else ""
    return (f'<section id="documents" data-operator-documents><h2>{t("docs")}</h2><p class="note">{t("docs_note")}</p>'
            f'{indexing}'
            f'<form method="post" action="/operator/documents" enctype="multipart/form-data" class="upload" '
            f'data-upload>{csrf}<label>{t("choose")} <input type="file" name="file" multiple required '
            f'accept=".md,.markdown,.txt,.html,.htm,.pdf,.docx"></label>'
            f'<label><input type="checkbox" name="replace" value="1"> {t("replace")}</label>'
            f'<button>{t("upload")}</button></form>'
            f'<table><tr><th>{t("file")}</th><th>{t("passages")}</th><th>{t("used")}</th><th>{t("top")}</th><th></th>'
            f'</tr>{rows}</table>'
            + (f'<h3>{t("kept")}</h3><table>{kept}</table>' if kept else "") + "</section>")


def _document_row(document: Listed, csrf: str, t) -> str:
    if document.unreadable:
        read = f'<span class="problem">{t("unreadable")}{html.escape(document.unreadable)}</span>'
    else:
        read = (f'<details><summary>{len(document.passages)} {t("passages")}</summary>'
                + "".join(f'<p><b>{html.escape(section)}</b><br>{html.escape(text[:600])}</p>'
                          for section, text in document.passages[:MAX_PASSAGES]) + "</details>")
    questions = "<br>".join(f"{html.escape(question)} ×{count}" for question, count in document.questions)
    delete = (f'<form method="post" action="/operator/documents/{quote(document.name)}">{csrf}'
              f'<input type="hidden" name="action" value="delete"><button data-delete>{t("delete")}</button></form>'
              if document.removable else "")
    return (f'<tr data-document="{html.escape(document.name)}"><td>{html.escape(document.name)}<br>'
            f'<span class="note">{html.escape(document.title)}</span></td><td>{read}</td>'
            f'<td>{document.replies} {t("replies")}</td><td>{questions}</td><td>{delete}</td></tr>')


def answer_form(question: str, wordings: list[str], form_token: str, t) -> str:
    """Under an unanswered question: write its answer as an entry of the guide, found by its wordings too."""
    title = question.rstrip("？?。. ")
    return (f'<details data-write-answer><summary>{t("write")}</summary>'
            f'<form method="post" action="/operator/answers" class="answer">{_csrf(form_token)}'
            f'<input type="hidden" name="question" value="{html.escape(question)}">'
            f'<label>{t("title")}<input name="title" value="{html.escape(title)}" maxlength="80"></label>'
            f'<label>{t("names")}<textarea name="names" rows="3">{html.escape(chr(10).join(wordings))}</textarea></label>'
            f'<label>{t("answer")}<textarea name="answer" rows="5" required maxlength="5000"></textarea></label>'
            f'<label class="tick"><input type="checkbox" name="replace" value="1"> {t("replace_entry")}</label>'
            f'<button>{t("save")}</button></form></details>')


def try_section(desk: Desk, t) -> str:
    personas = "".join(f'<option>{html.escape(name)}</option>' for name in desk.personas)
    choice = f'<select name="persona" aria-label="{t("persona")}">{personas}</select>' if len(desk.personas) > 1 else ""
    return (f'<section data-operator-try><h2>{t("try")}</h2><p class="note">{t("try_note")}</p>'
            f'<form method="get" action="/operator/try" class="try"><input name="question" required maxlength="2000" '
            f'aria-label="{t("try")}">{choice}<button>{t("ask")}</button></form></section>')


def activity_section(desk: Desk, t) -> str:
    rows = "".join(f'<tr data-activity="{change.action}"><td>{html.escape(change.at[:16].replace("T", " "))}</td>'
                   f'<td>{html.escape(change.operator)}</td><td>{t(change.action + "_a")}</td>'
                   f'<td>{html.escape(change.file)}</td></tr>' for change in desk.activity)
    table = (f'<table><tr><th>{t("when")}</th><th>{t("who")}</th><th>{t("what")}</th><th>{t("file")}</th></tr>{rows}'
             f'</table>') if rows else f"<p>{t('none')}</p>"
    return (f'<section data-operator-activity><h2>{t("activity")}</h2>{table}<p><a href="/operator/activity.csv" '
            f'download>activity.csv</a></p></section>')


def answer_page(result, form_token: str, english: bool) -> str:
    """The page "try a question" opens (`result`: a `chat.preview.Preview`): the passages found, what the model reads,
    the app's own reply or the guide's (once asked for), and a button for the reply."""
    t = words(english)
    found = "".join(f'<div class="passage"><b>{html.escape(passage["source"])} · {html.escape(passage["section"])}</b>'
                    f'<p>{html.escape(passage["sentences"])}</p></div>' for passage in result.passages)
    parts = [f'<h2>{t("found")}</h2>{found or "<p>" + t("no_passage") + "</p>"}']
    if result.reads:
        parts.append(f'<h2>{t("reads")}</h2><pre data-reads>{html.escape(result.reads)}</pre>')
    if result.said_by_app:
        parts.append(f'<h2>{t("app_says")}</h2><p data-said-by-app>{html.escape(result.said_by_app)}</p>')
    if result.reply is not None:
        parts.append(f'<h2>{t("preview")}</h2><div class="preview" data-preview-reply>{html.escape(result.reply)}'
                     f'</div>' + (f'<p class="note">{result.seconds} s</p>' if result.seconds is not None else ""))
    else:
        parts.append(f'<form method="post" action="/operator/try">{_csrf(form_token)}'
                     f'<input type="hidden" name="question" value="{html.escape(result.question)}">'
                     f'<input type="hidden" name="persona" value="{html.escape(result.persona)}">'
                     f'<button data-see-reply>{t("see_reply")}</button></form>')
    return _page(t("try"), f'<h1>{t("try")}</h1><p class="question" data-tried>{html.escape(result.question)}</p>'
                 + "".join(parts), english)


def outcome_page(outcomes: list[dict], english: bool) -> str:
    """What became of each file (or change) sent from the page, where something was not saved."""
    t = words(english)
    rows = "".join(f'<li>{html.escape(str(outcome.get("file") or ""))} '
                   + (f'<span class="problem">{t("not_saved")}: {html.escape(outcome["error"])}</span>'
                      if "error" in outcome else t("saved")) + "</li>" for outcome in outcomes)
    return _page(t("outcome"), f'<h1>{t("outcome")}</h1><ul data-outcome>{rows}</ul>', english)


def _page(title: str, body: str, english: bool) -> str:
    back = words(english)("back")
    return (f'<!doctype html><html lang="{"en" if english else "zh-CN"}"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}</title>'
            f'<style>{STYLE}</style></head><body data-operator-page>{body}<p><a href="/operator">{back}</a></p>'
            f'</body></html>')


def _csrf(form_token: str) -> str:
    return f'<input type="hidden" name="csrf" value="{form_token}">' if form_token else ""


MAX_PASSAGES = 30  # shown under a document; documents.json holds every one
STYLE = """
body { font-family: "Noto Sans CJK SC", "Noto Sans SC", sans-serif, "Noto Emoji"; margin: 1.5rem; color: #1f2328; }
pre { white-space: pre-wrap; background: #f6f8fa; padding: .6rem; border-radius: 6px; font-size: .85rem; }
.passage, .preview { border-left: 3px solid #2f81f7; padding: .2rem .8rem; margin: .6rem 0; }
.preview { border-color: #8250df; background: #fbf7ff; white-space: pre-wrap; }
.question { font-size: 1.1rem; font-weight: bold; } .note { color: #57606a; font-size: .9rem; }
.problem { color: #cf222e; } button { font-size: 1rem; padding: .4rem .9rem; }
"""
FORM_STYLE = """
.upload, .try { display: flex; flex-wrap: wrap; gap: .6rem; align-items: center; margin: .5rem 0 1rem; }
.try input { flex: 1 1 16rem; font-size: 1rem; padding: .4rem; }
.answer { display: grid; gap: .4rem; margin: .4rem 0; } .answer label { display: grid; gap: .2rem; }
.answer label.tick { display: block; }
.answer input:not([type=checkbox]), .answer textarea { font: inherit; padding: .3rem; width: 100%; box-sizing: border-box; }
.problem { color: #cf222e; } button { font-size: 1rem; padding: .4rem .9rem; } td form { margin: 0; }
td button { white-space: nowrap; }
@media (max-width: 40rem) {  /* a phone: the rows that hold forms are cards, so no form is off the screen */
  [data-operator-unanswered] table, [data-operator-documents] table, [data-operator-activity] table { min-width: 0; }
  [data-operator-unanswered] tr, [data-operator-documents] tr { display: block; padding: .4rem 0;
                                                                 border-bottom: 1px solid #d0d7de; }
  [data-operator-unanswered] th, [data-operator-documents] th { display: none; }
  [data-operator-unanswered] td, [data-operator-documents] td { display: block; border: 0; padding: .15rem 0; }
}
"""
