"""The operators' folder as the operator's page changes it: documents saved, replaced, deleted and restored, and
answers written as entries of the guide, with every change kept.

A name is cleaned before anything is written: only its last part is taken (`../../x.md` is `x.md`, inside the
folder), without control characters, characters no file system takes, or the dots that hide a file; it must end in
a suffix the knowledge reader takes. A name already in the folder is never overwritten unless asked to replace it.
A file is written under a hidden name (which the index skips) and then renamed, so the index never reads half a
file. A file deleted or replaced is moved to the kept folder, named by the time it left, and can be restored for
`KEEP_DAYS` days; older ones are removed at the next change. Knows nothing of the web or the index: the caller
indexes the folder after a change.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from io import BytesIO
from pathlib import Path
from typing import BinaryIO

from retrieval.reading import SUFFIXES

KEEP_DAYS = 30
MAX_NAME_CHARS = 120
_REFUSED = re.compile(r'[<>:"/\\|?*]')
_STAMP = "%Y%m%dT%H%M%S.%fZ"
KINDS = "Markdown (.md), text (.txt), HTML (.html), PDF (.pdf) or Word (.docx)"


class LibraryError(Exception):
    """What went wrong with a change, in words for the operator."""


class BadName(LibraryError):
    pass


class AlreadyThere(LibraryError):
    pass


class NotThere(LibraryError):
    pass


@dataclass(frozen=True)
class Kept:
    """A document deleted or replaced, kept for restoring."""

    id: str  # its file name in the kept folder
    name: str  # its name in the operators' folder
    left: str  # UTC, ISO 8601
    why: str  # "deleted" or "replaced"


def clean_name(given: str) -> str:
    """A file name safe to write in the folder, or `BadName` saying why not."""
    name = unicodedata.normalize("NFC", re.split(r"[/\\]", given)[-1])
    name = "".join(char for char in name if unicodedata.category(char)[0] != "C")
    name = " ".join(_REFUSED.sub(" ", name).split()).lstrip(". ").rstrip(". ")
    stem, dot, suffix = name.rpartition(".")
    if not dot or f".{suffix.lower()}" not in SUFFIXES:
        raise BadName(f"“{given[:80]}” is not a kind of document the guide reads: upload {KINDS}.")
    if not stem.strip(". "):
        raise BadName(f"“{given[:80]}” has no name before its suffix: rename it and upload it again.")
    return f"{stem[:MAX_NAME_CHARS].rstrip('. ')}.{suffix.lower()}"


def entry(title: str, answer: str, names: list[str]) -> str:
    """An answer as the guide's entries are written: its title, the other names it is found by, the answer."""
    title = " ".join(title.replace("#", " ").split())
    others = "、".join(dict.fromkeys(" ".join(name.split()) for name in names if name.strip() and name != title))
    return f"# {title}\n\n" + (f"别名：{others}\n\n" if others else "") + answer.strip() + "\n"


class Library:
    def __init__(self, folder: Path, kept: Path) -> None:
        self.folder, self.kept_folder = folder, kept

    def save(self, name: str, content: BinaryIO, replace: bool = False) -> tuple[str, bool]:
        """Write a document from `content`; its cleaned name, and whether it replaced one (kept first)."""
        name = clean_name(name)
        target = self.folder / name
        if target.exists() and not replace:
            raise AlreadyThere(f"{name} is already in the guide's documents: tick “replace” to put this one in its "
                               "place (the old one is kept for 30 days), or rename the file.")
        self.folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=self.folder, prefix=".upload-", delete=False) as part:
            shutil.copyfileobj(content, part, 1024 * 1024)
        replaced = target.exists()
        if replaced:
            self._keep(target, "replaced")
        os.replace(part.name, target)
        return name, replaced

    def write(self, name: str, text: str, replace: bool = False) -> tuple[str, bool]:
        return self.save(name, BytesIO(text.encode()), replace)

    def delete(self, name: str) -> str:
        target = self._present(name)
        self._keep(target, "deleted")
        return target.name

    def restore(self, kept_id: str) -> str:
        """Put a kept document back under its name (a document there now is kept in its turn); its name."""
        source = self.kept_folder / kept_id
        if "/" in kept_id or kept_id.startswith(".") or not source.is_file() or not (found := _read_id(kept_id)):
            raise NotThere("That kept document is not there any more (kept documents are removed after "
                           f"{KEEP_DAYS} days): reload the page.")
        target = self.folder / found.name
        if target.exists():
            self._keep(target, "replaced")
        self.folder.mkdir(parents=True, exist_ok=True)
        shutil.move(source, target)
        os.utime(target)  # changed now: the index reads it again, the operator's page sees what it answers
        return found.name

    def kept(self) -> list[Kept]:
        """The documents that can be restored, latest first (older ones are removed here)."""
        if not self.kept_folder.is_dir():
            return []
        limit = datetime.now(UTC) - timedelta(days=KEEP_DAYS)
        found = []
        for path in self.kept_folder.iterdir():
            if (item := _read_id(path.name)) is None:
                continue
            if datetime.fromisoformat(item.left) < limit:
                path.unlink(missing_ok=True)
            else:
                found.append(item)
        return sorted(found, key=lambda item: item.left, reverse=True)

    def _present(self, name: str) -> Path:
        target = self.folder / clean_name(name)
        if not target.is_file():
            raise NotThere(f"{name} is not among the guide's documents: reload the page to see the list.")
        return target

    def _keep(self, path: Path, why: str) -> None:
        self.kept_folder.mkdir(parents=True, exist_ok=True)
        shutil.move(path, self.kept_folder / f"{datetime.now(UTC).strftime(_STAMP)}~{why}~{path.name}")
        self.kept()  # the old ones go


def _read_id(kept_id: str) -> Kept | None:
    stamp, _, rest = kept_id.partition("~")
    why, _, name = rest.partition("~")
    try:
        left = datetime.strptime(stamp, _STAMP).replace(tzinfo=UTC)
    except ValueError:
        return None
    return Kept(kept_id, name, left.isoformat(), why) if why in ("deleted", "replaced") and name else None
