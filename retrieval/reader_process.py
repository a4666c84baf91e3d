"""Documents read in a process of their own, within limits, so that no document can stop the app.

An operator's folder may hold anything: a DOCX whose parts inflate to gigabytes, a PDF that pure-Python parsing
takes minutes over (holding the interpreter, in the app's process, of every chat), a file on which a parser
crashes. Here a file is refused before it is opened when it is larger than `MAX_FILE_BYTES`, and a DOCX when its
parts declare more than `MAX_INFLATED_BYTES` (Python's zip reader never inflates a part past its declared size);
everything else is read, cut into passages and split into search terms in a child process at the lowest CPU
priority, with at most `MEMORY_LIMIT_BYTES` of address space and `SECONDS_PER_FILE` for each file. A child that
dies or overruns is ended, the file is reported unreadable with the reason, and the next file gets a new child.
Knows nothing of the index it feeds.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from retrieval.passages import passages
from retrieval.reading import ALIASES, UnreadableError, read_document
from retrieval.terms import HANGUL, romanized, terms

MAX_FILE_BYTES = 64 * 1024 * 1024  # a larger file is refused unread: split it, or export its text
MAX_INFLATED_BYTES = 256 * 1024 * 1024  # the parts of a DOCX, as they declare themselves once inflated
MAX_TEXT_CHARS = 5_000_000  # text kept of one document (some 10,000 passages)
MEMORY_LIMIT_BYTES = 2 * 1024 ** 3  # the reading process's address space
SECONDS_PER_FILE = 120.0


@dataclass(frozen=True)
class ReadPassage:
    section: str
    text: str
    searchable: str  # its search terms, space-separated


@dataclass(frozen=True)
class ReadFile:
    title: str
    passages: tuple[ReadPassage, ...]
    aliases: str = ""  # the document's other names (`reading.Document.aliases`)


def check_size(path: Path) -> None:
    """Refuse, unread, a file too large to read safely (raises `UnreadableError` saying what to do)."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise UnreadableError(f"it is {size / 2 ** 20:.0f} MiB, more than the {MAX_FILE_BYTES // 2 ** 20} MiB read; "
                              "split it into smaller files, or save its text as .txt or .md")
    if path.suffix.lower() == ".docx":
        try:
            with zipfile.ZipFile(path) as archive:
                inflated = sum(part.file_size for part in archive.infolist())
        except (zipfile.BadZipFile, OSError) as error:
            raise UnreadableError(f"not a DOCX file ({error})") from None
        if inflated > MAX_INFLATED_BYTES:
            raise UnreadableError(f"its parts inflate to {inflated / 2 ** 20:.0f} MiB, more than the "
                                  f"{MAX_INFLATED_BYTES // 2 ** 20} MiB read (a zip bomb, or a document of huge images)")


def read_file(path: Path, pairs: bool) -> ReadFile:
    """A document's title and passages with their search terms, read in the calling process."""
    check_size(path)
    document = read_document(path, MAX_TEXT_CHARS)
    # Every passage is found by these; not by their Korean ones, a few words that would weigh on every ranking of the
    # guide's Chinese: a Korean question finds its entry by name (`grounding.named`) and its passages by the
    # glossary's Chinese words (`grounding.search_for`).
    names = HANGUL.sub(" ", f"{document.title} {romanized(document.title)} {document.aliases}")
    return ReadFile(document.title, tuple(
        ReadPassage(passage.section, passage.text,
                    " ".join(terms(f"{names} {passage.section} {_searched(passage.text)}", pairs)))  # and its section
        for passage in passages(document)), document.aliases)


def _searched(text: str) -> str:
    """A passage's text as it is searched: its lines of other names without their Korean ones."""
    return ALIASES.sub(lambda line: HANGUL.sub(" ", line[0]), text)


class ReaderProcess:
    """A child process that reads files one at a time (`read`), started on first use and again after a failure;
    `close` ends it. One thread uses it at a time. The child is `python -m retrieval.reader_process`, which imports
    this module's readers only: a child of multiprocessing's "spawn" runs the app's main module first (Chainlit's
    command line), and hiding that module for a moment (`engine.spawn`) is not safe from a worker thread while the
    engine starts."""

    def __init__(self, pairs: bool = False) -> None:
        self.pairs = pairs
        self._child: subprocess.Popen | None = None
        self._connection: Connection | None = None

    def read(self, path: Path) -> ReadFile:
        """The file's title and passages; raises `UnreadableError` saying why it cannot be read."""
        check_size(path)  # here too: a refused file never reaches the child
        if self._child is None:
            self._start()
        try:
            self._connection.send(str(path))
            if not self._connection.poll(SECONDS_PER_FILE):
                self.close()
                raise UnreadableError(f"reading it took more than {SECONDS_PER_FILE:.0f} s")
            outcome, value = self._connection.recv()
        except (EOFError, OSError):  # the child died: a crash in a parser, or the kernel ended it
            code = self._end()
            raise UnreadableError(f"the reader crashed on it (exit code {code})") from None
        if outcome == "error":
            raise UnreadableError(value)
        return value

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        with theirs:
            self._child = subprocess.Popen([sys.executable, "-m", __name__, str(theirs.fileno()), str(int(self.pairs))],
                                           pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
        self._connection = Connection(ours.detach())

    def _end(self) -> int | None:
        child, self._child = self._child, None
        if child is None:
            return None
        if child.poll() is None:
            child.kill()
        child.wait(5)
        self._connection.close()
        return child.returncode

    def close(self) -> None:
        self._end()

    def __enter__(self) -> ReaderProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve(connection: Connection, pairs: bool) -> None:
    """The child: read each path sent, answer ("ok", ReadFile) or ("error", why), until the pipe closes."""
    os.nice(19)
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    while True:
        try:
            path = connection.recv()
        except EOFError:
            return
        try:
            connection.send(("ok", read_file(Path(path), pairs)))
        except MemoryError:
            connection.send(("error", f"reading it needed more than {MEMORY_LIMIT_BYTES // 2 ** 30} GiB of memory"))
        except (UnreadableError, OSError) as error:
            connection.send(("error", str(error) or type(error).__name__))


if __name__ == "__main__":  # the child, serving from this module by its name: what it sends unpickles in the app
    from retrieval.reader_process import _serve as serve

    serve(Connection(int(sys.argv[1])), sys.argv[2] == "1")
