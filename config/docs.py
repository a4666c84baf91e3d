"""The settings' documentation, written from their own definitions (`config.settings.Settings`): the README's table
of the main settings, the table of all of them in `docs/settings.md`, and `.env.example`, so none can drift from
the code.

`python -m config.docs` rewrites the three; a fast test fails when one differs from what this writes.
"""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass, fields
from pathlib import Path

from config.settings import CACHE_ROOT, DATA_ROOT, PROJECT_ROOT, Settings

ENV_EXAMPLE = PROJECT_ROOT / ".env.example"
# The settings a newcomer meets first, in the README; docs/settings.md has them all.
MAIN = ("model", "weights", "max_model_len", "max_concurrent_replies", "persona", "host", "port", "state_dir",
        "knowledge_dir", "users_file", "engine_urls")


@dataclass(frozen=True)
class Table:
    """A settings table in a Markdown file, between two marker lines."""

    path: Path
    start: str
    end: str
    names: tuple[str, ...] | None  # None: every setting

    def written_into(self, text: str) -> str:
        before, start, rest = text.partition(self.start)
        _, end, after = rest.partition(self.end)
        if not start or not end:
            raise ValueError(f"{self.path.name} lacks the lines {self.start!r} and {self.end!r} around its table")
        return f"{before}{self.start}\n{settings_table(self.names)}\n{self.end}{after}"


TABLES = (Table(PROJECT_ROOT / "README.md", "<!-- main settings: written by `python -m config.docs` -->",
                "<!-- end of main settings -->", MAIN),
          Table(PROJECT_ROOT / "docs" / "settings.md", "<!-- settings table: written by `python -m config.docs` -->",
                "<!-- end of settings table -->", None))
ENV_HEADER = """\
# The app's settings with their defaults, written by `python -m config.docs` from config/settings.py.
# Copy to .env (read by Chainlit at start-up and by every command of the app) and set what you change;
# the environment's own variables win over .env. Every setting is optional.
"""


def shown_default(value: object) -> str:
    """A default as a person would write it: `~` for the home folder, a folder of the project by its own name."""
    if value in (None, "", ()):
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):  # as the variable is written: comma-separated
        return ",".join(map(str, value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, Path):
        if value.is_relative_to(PROJECT_ROOT):
            return f"{value.relative_to(PROJECT_ROOT)}/"
        for root, written in ((CACHE_ROOT, "~/.cache"), (DATA_ROOT, "~/.local/share")):
            if value.is_relative_to(root):
                return f"{written}/{value.relative_to(root)}"
    return str(value)


def settings_table(names: tuple[str, ...] | None = None) -> str:
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for item in fields(Settings):
        if names is not None and item.name not in names:
            continue
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


def main() -> int:
    for table in TABLES:
        table.path.write_text(table.written_into(table.path.read_text(encoding="utf-8")), encoding="utf-8")
    ENV_EXAMPLE.write_text(env_example(), encoding="utf-8")
    print(f"==> Wrote the settings into {', '.join(table.path.name for table in TABLES)} and {ENV_EXAMPLE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
