"""Markdown read by a real parser (markdown-it-py: CommonMark with tables and strikethrough) into blocks of plain
text: what a document's reader indexes and what Read aloud hands the browser.

Images become their alternative text and links their words (optionally with the address after them), whatever
their brackets, escapes or line breaks: a parser sees what a browser would render, where regular expressions missed
`![地图 [新]](…)` and `![a\\]b](…)`. Raw HTML is text, never markup. The parser's time grows linearly with its input.
Imports nothing of ours.
"""

from __future__ import annotations

from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

_PARSER = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


@dataclass(frozen=True)
class Block:
    text: str  # its words, line breaks kept; a table's rows as "| a | b |" lines
    heading: int = 0  # 1-6 for a heading, else 0
    marker: str = ""  # "- " or "2. " on the first block of a list item
    depth: int = 0  # how deep in lists
    gap: bool = False  # a blank line (or more) before it in the source


def blocks(markdown: str, addresses: bool = True) -> list[Block]:
    """The blocks of `markdown` in order: headings, paragraphs, list items, code, tables (quotes lose their `>`).
    `addresses`: a link's address follows its words in brackets, "官网 (https://…)"."""
    found: list[Block] = []
    depth, marker, end = 0, "", 0
    tokens = _PARSER.parse(markdown)
    for index, token in enumerate(tokens):
        if token.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
        elif token.type == "list_item_open":
            marker = f"{token.info}{token.markup} " if token.info else "- "
        elif token.type in ("heading_open", "paragraph_open", "fence", "code_block", "table_open"):
            start = token.map[0] if token.map else end
            if token.type in ("heading_open", "paragraph_open"):
                text = inline_text(tokens[index + 1], addresses)
            elif token.type == "table_open":
                text = _table(tokens, index, addresses)
            else:
                text = token.content.rstrip("\n")
            level = int(token.tag[1]) if token.type == "heading_open" else 0
            found.append(Block(text, level, marker, depth, gap=bool(found) and start > end))
            marker, end = "", token.map[1] if token.map else end
    return found


def inline_text(token: Token, addresses: bool = True) -> str:
    """The words of an inline token: text and code as written, breaks as line breaks, an image as its alternative
    text, a link as its words (and address); emphasis and HTML as plain characters."""
    out: list[str] = []
    links: list[tuple[str, int]] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline", "html_inline"):
            out.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif child.type == "image":  # its alternative text, parsed: its children
            out.append(inline_text(child, addresses=False))
        elif child.type == "link_open":
            links.append((_PARSER.normalizeLinkText(str(child.attrGet("href") or "")), len(out)))
        elif child.type == "link_close" and links:
            address, start = links.pop()
            if addresses and address and address not in "".join(out[start:]):
                out.append(f" ({address})")
    return "".join(out)


def _table(tokens: list[Token], start: int, addresses: bool) -> str:
    rows: list[str] = []
    cells: list[str] = []
    for token in tokens[start + 1:]:
        if token.type == "table_close":
            break
        if token.type == "inline":
            cells.append(inline_text(token, addresses))
        elif token.type == "tr_close":
            rows.append("| " + " | ".join(cells) + " |")
            cells = []
    return "\n".join(rows)
