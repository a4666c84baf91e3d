"""The settings' documentation, written from their own definitions (`engine.config.Settings`): the README's table
and `.env.example`, so neither can drift from the code.

`python -m engine.settings_docs` rewrites both; a fast test fails when either differs from what this writes.
"""

from __future__ import annotations

import sys
import textwrap
from dataclasses import fields
from pathlib import Path

from engine.config import CACHE_ROOT, DATA_ROOT, PROJECT_ROOT, Settings

README = PROJECT_ROOT / "README.md"
ENV_EXAMPLE = PROJECT_ROOT / ".env.example"
# The README's table stands between these two lines.
TABLE_START = "<!-- settings table: written by `python -m engine.settings_docs` -->"
TABLE_END = "<!-- end of settings table -->"
ENV_HEADER = """\
# The app's settings with their defaults, written by `python -m engine.settings_docs` from engine/config.py.
# Copy to .env (read by Chainlit at start-up and by every command of the app) and set what you change;
# the environment's own variables win over .env. Every setting is optional.
"""


def shown_default(value: object) -> str:
    """A default as a person would write it: `~` for the home folder, a folder of the project by its own name."""
    if value in (None, "", ()):
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, Path):
        if value.is_relative_to(PROJECT_ROOT):
            return f"{value.relative_to(PROJECT_ROOT)}/"
        for root, written in ((CACHE_ROOT, "~/.cache"), (DATA_ROOT, "~/.local/share")):
            if value.is_relative_to(root):
                return f"{written}/{value.relative_to(root)}"
    return str(value)


def settings_table() -> str:
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for item in fields(Settings):
        default = shown_default(item.default)
        rows.append(f"| `CHAT_{item.name.upper()}` | {f'`{default}`' if default else 'empty'} | {item.metadata['doc']} |")
    return "\n".join(rows)


def env_example() -> str:
    blocks = []
    for item in fields(Settings):
        doc = textwrap.fill(item.metadata["doc"].replace("`", ""), width=110, initial_indent="# ",
                            subsequent_indent="# ")
        blocks.append(f"{doc}\n# CHAT_{item.name.upper()}={shown_default(item.default)}\n")
    return ENV_HEADER + "\n" + "\n".join(blocks)


def readme_with_table(readme: str) -> str:
    before, start, rest = readme.partition(TABLE_START)
    _, end, after = rest.partition(TABLE_END)
    if not start or not end:
        raise ValueError(f"README.md lacks the lines {TABLE_START!r} and {TABLE_END!r} around the settings table")
    return f"{before}{TABLE_START}\n{settings_table()}\n{TABLE_END}{after}"


def main() -> int:
    README.write_text(readme_with_table(README.read_text(encoding="utf-8")), encoding="utf-8")
    ENV_EXAMPLE.write_text(env_example(), encoding="utf-8")
    print(f"==> Wrote the settings into {README.name} and {ENV_EXAMPLE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
