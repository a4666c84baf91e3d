"""Read one document into its title and sections, whatever its format: Markdown, plain text, HTML, PDF, DOCX.

A section is (heading, text); its text keeps paragraphs apart by blank lines. Markdown and DOCX sections follow
their headings, HTML's its `h1`–`h6` (lxml), a PDF's its pages, plain text is one section. The title is the first
top heading (HTML's `<title>`, DOCX's Title or first heading), else the file name without its extension. Markdown is
read by a real parser (`config.markdown_text`): its images become their alternative text and its links their words
with the address after them, whatever their brackets. A line naming the document's other names ("别名：…", "Also known
as: …", as in the guide's entries: English names, nicknames) is kept as its `aliases`, which every passage is found
by. A file that cannot be read raises `UnreadableError` saying why. Reading runs in whatever process calls it: the app
reads through `retrieval.reader_process`, which sets the limits.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from config.markdown_text import blocks

logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings about a broken file repeat the one line we log
SUFFIXES = (".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".docx")


class UnreadableError(Exception):
    """Why a file was skipped, in words for the log."""


@dataclass(frozen=True)
class Document:
    title: str
    sections: tuple[tuple[str, str], ...]  # (heading, text); the heading may be empty
    aliases: str = ""  # the document's other names, from its "别名" / "Also known as" lines


def read_document(path: Path, max_chars: int | None = None) -> Document:
    """The document's title and sections, at most `max_chars` of their text (the rest is left out)."""
    suffix = path.suffix.lower()
    try:
        if suffix in (".md", ".markdown"):
            title, sections = _markdown(_text(path))
        elif suffix == ".txt":
            title, sections = "", [("", _text(path))]
        elif suffix in (".html", ".htm"):
            title, sections = _html(path.read_bytes())
        elif suffix == ".pdf":
            title, sections = _pdf(path)
        elif suffix == ".docx":
            title, sections = _docx(path)
        else:
            raise UnreadableError(f"{suffix or 'no extension'} is not a format read here ({', '.join(SUFFIXES)})")
    except UnreadableError:
        raise
    except Exception as error:  # each parser has its own errors; any of them means this file is skipped
        raise UnreadableError(f"{type(error).__name__}: {error}") from None
    kept, room = [], max_chars if max_chars is not None else float("inf")
    for heading, text in sections:
        text = text.strip()[:int(min(room, len(text)))]
        if text.strip():
            kept.append((heading.strip(), text.strip()))
            room -= len(text)
    if not kept:
        raise UnreadableError("no text found in it (a scanned PDF needs OCR first)")
    aliases = "; ".join(match.group(1).strip() for _, text in kept for match in ALIASES.finditer(text))
    return Document(title.strip() or path.stem, tuple(kept), aliases)


ALIASES = re.compile(r"^[ \t]*(?:[-*+][ \t]*)?[^\n:：]{0,12}(?:别名|also known as)[^\n:：]{0,20}[:：](.+)$",
                     re.MULTILINE | re.IGNORECASE)


def _text(path: Path) -> str:
    data = path.read_bytes()
    for encoding in ("utf-8-sig", "gb18030"):  # Chinese files written on Windows are often GBK
        if _decodes(data, encoding):
            return data.decode(encoding)
    raise UnreadableError("it is neither UTF-8 nor GBK text")


def _decodes(data: bytes, encoding: str) -> bool:
    try:
        data.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True


def _markdown(text: str) -> tuple[str, list[tuple[str, str]]]:
    title, heading, lines, sections = "", "", [], []
    for block in blocks(text):
        if not block.heading:
            indent = "  " * max(0, block.depth - 1) + block.marker
            lines.append(("\n" if block.gap and lines else "") + indent + block.text)
            continue
        sections.append((heading, "\n".join(lines)))
        lines = []
        if block.heading == 1 and not title:
            title, heading = block.text, ""
        else:
            heading = block.text
    sections.append((heading, "\n".join(lines)))
    return title, sections


def _html(data: bytes) -> tuple[str, list[tuple[str, str]]]:
    from lxml import html

    encoding = "utf-8" if _decodes(data, "utf-8") else "gb18030"  # what Chinese pages are written in
    page = html.document_fromstring(data, parser=html.HTMLParser(encoding=encoding))
    for hidden in page.xpath("//script | //style | //noscript | //template"):
        hidden.drop_tree()
    title = " ".join((page.findtext(".//title") or "").split())
    heading, paragraphs, sections = "", [], []
    body = page.find("body") if page.find("body") is not None else page
    for block in body.iter("h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "td", "dd"):
        if any(parent.tag in ("p", "li", "pre", "td", "dd") for parent in block.iterancestors()):
            continue  # its text is in the enclosing block
        text = " ".join(block.text_content().split())
        if block.tag.startswith("h"):
            sections.append((heading, "\n\n".join(paragraphs)))
            heading, paragraphs = text, []
            title = title or (text if block.tag == "h1" else "")
        elif text:
            paragraphs.append(text)
    sections.append((heading, "\n\n".join(paragraphs)))
    return title, sections


def _pdf(path: Path) -> tuple[str, list[tuple[str, str]]]:
    from pypdf import PdfReader

    reader = PdfReader(path)
    title = (reader.metadata.title if reader.metadata else None) or ""
    return title, [(f"第 {number} 页 page {number}", page.extract_text() or "")
                   for number, page in enumerate(reader.pages, 1)]


def _docx(path: Path) -> tuple[str, list[tuple[str, str]]]:
    import docx

    title, heading, paragraphs, sections = "", "", [], []
    for paragraph in docx.Document(str(path)).paragraphs:
        style = (paragraph.style.name if paragraph.style is not None else "") or ""
        text = paragraph.text.strip()
        if style == "Title" or style.startswith("Heading"):
            if style == "Title" or (style == "Heading 1" and not title):
                title = title or text
                if style == "Title":
                    continue
            sections.append((heading, "\n\n".join(paragraphs)))
            heading, paragraphs = text, []
        elif text:
            paragraphs.append(text)
    sections.append((heading, "\n\n".join(paragraphs)))
    return title, sections
