"""The passages of every knowledge folder in one SQLite file, searched by BM25 over their terms (FTS5).

`sync` brings a folder's entry up to date with the disk: new and changed files (by modification time and size)
are read and indexed, removed ones forgotten, so a file taken out of the folder leaves the answers. A file that
cannot be read (too large, a zip bomb, a reader that crashed or overran: `retrieval.reader_process`, which reads
every file in a process of its own, or a link that leads out of the folder) is logged once (which file, why) and
remembered as skipped until it changes. `search` ranks the
passages of the given folders against a text's terms. Each call opens its own connection: indexing runs on one
thread while searches run on others.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from config.writing import simplified
from retrieval.places import places as places_in
from retrieval.places import sight
from retrieval.reader_process import ReaderProcess
from retrieval.reading import SUFFIXES, UnreadableError
from retrieval.terms import terms

log = logging.getLogger(__name__)
READER_VERSION = 6  # part of each file's stamp: a new version reads every file again (4: Markdown by a parser;
# 5: Traditional characters searched as Simplified, each document's other names kept; 6: Korean by pairs of syllables)

SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (id INTEGER PRIMARY KEY, folder TEXT NOT NULL, path TEXT NOT NULL UNIQUE,
                                      stamp TEXT NOT NULL, title TEXT NOT NULL, problem TEXT NOT NULL,
                                      aliases TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS passages (id INTEGER PRIMARY KEY, document INTEGER NOT NULL, section TEXT NOT NULL,
                                     text TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS passages_document ON passages (document);
CREATE VIRTUAL TABLE IF NOT EXISTS terms USING fts5(body, tokenize = 'unicode61');
"""


@dataclass(frozen=True)
class Found:
    """A passage found, with its document's file and the BM25 score (higher is better). `text` is what the model is
    given: the passage, or the sentences of it that bear on the question (`grounding.focused`), then `whole` holds
    the passage as the visitor opens it."""

    path: str
    title: str
    section: str
    text: str
    score: float
    whole: str = ""
    document: str = ""  # the whole document the passage is part of, as indexed

    @property
    def name(self) -> str:
        """The document's file name without its extension: how a reply names its source."""
        return Path(self.path).stem


@dataclass(frozen=True)
class Held:
    """The documents that hold a word (`KnowledgeIndex.holding`), and those of them that describe it as a thing."""

    by: frozenset[str]
    describing: frozenset[str]


def describes(word: str, title: str, aliases: str, text: str) -> bool:
    """Whether a document (its title, other names and a passage) describes `word` as a thing of its own: a name of the
    document begins with it, or the passage gives it as a term ("- 虾饺：澄面做的…", "关公狮（红色）", "“镬耳屋”")."""
    names = [title, *re.split("[;；]", aliases)]
    term = rf"{re.escape(word)}[\u3400-\u9fff]{{0,2}}\s*[：:（(]|[“「《]{re.escape(word)}"
    return (any(simplified(name).strip().lower().startswith(word) for name in names)
            or bool(re.search(term, simplified(text).lower())))


@dataclass(frozen=True)
class SyncReport:
    files: int  # readable files in the folders
    passages: int
    indexed: int  # files read this time
    removed: int
    skipped: int  # files that cannot be read
    seconds: float


def documents_in(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.suffix.lower() in SUFFIXES and path.is_file()
                  and not any(part.startswith(".") for part in path.relative_to(folder).parts))


class KnowledgeIndex:
    """`pairs`: index character pairs beside the words (`retrieval.terms`); the benchmark compares both."""

    def __init__(self, path: Path, pairs: bool = False) -> None:
        self.path = path
        self.pairs = pairs
        path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as db, db:
            db.executescript(SCHEMA)
            if "aliases" not in {row[1] for row in db.execute("PRAGMA table_info(documents)")}:  # an index of version 4
                db.execute("ALTER TABLE documents ADD COLUMN aliases TEXT NOT NULL DEFAULT ''")

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("PRAGMA journal_mode = WAL")
        return db

    def sync(self, folder: Path, progress: Callable[[int, int], None] = lambda done, total: None) -> SyncReport:
        started = time.perf_counter()
        key = str(folder.resolve())
        present = {str(path.resolve()): path for path in documents_in(folder)} if folder.is_dir() else {}
        with closing(self._connect()) as db:
            known = {path: (number, stamp) for number, path, stamp in
                     db.execute("SELECT id, path, stamp FROM documents WHERE folder = ?", (key,))}
            gone = [number for path, (number, _) in known.items() if path not in present]
            for number in gone:
                with db:
                    _forget(db, number)
            stale = [(path, _stamp(file)) for path, file in present.items()]
            stale = [(path, stamp) for path, stamp in stale if known.get(path, (0, ""))[1] != stamp]
            skipped = 0
            with ReaderProcess(self.pairs) as reader:
                for done, (path, stamp) in enumerate(stale, 1):
                    skipped += not self._index_file(db, reader, key, Path(path), present[path], stamp)
                    progress(done, len(stale))
            files, count = db.execute(
                "SELECT COUNT(DISTINCT d.id), COUNT(p.id) FROM documents d LEFT JOIN passages p ON p.document = d.id "
                "WHERE d.folder = ? AND d.problem = ''", (key,)).fetchone()
        return SyncReport(files, count, len(stale) - skipped, len(gone), skipped, time.perf_counter() - started)

    def _index_file(self, db: sqlite3.Connection, reader: ReaderProcess, folder: str, path: Path, found: Path,
                    stamp: str) -> bool:
        """Read `path` (found in the folder as `found`, which may be a link) into the index, or remember why not."""
        try:
            if not path.is_relative_to(folder):
                raise UnreadableError(f"it is a link to {path}, outside the folder; copy the file in instead")
            document, problem = reader.read(path), ""
        except (UnreadableError, OSError) as error:
            document, problem = None, str(error) or type(error).__name__
            log.warning("Knowledge: skipped %s: %s", found, problem)
        with db:
            if row := db.execute("SELECT id FROM documents WHERE path = ?", (str(path),)).fetchone():
                _forget(db, row[0])
            number = db.execute(
                "INSERT INTO documents (folder, path, stamp, title, problem, aliases) VALUES (?, ?, ?, ?, ?, ?)",
                (folder, str(path), stamp, document.title if document else "", problem,
                 document.aliases if document else "")).lastrowid
            for passage in document.passages if document else ():
                row_id = db.execute("INSERT INTO passages (document, section, text) VALUES (?, ?, ?)",
                                    (number, passage.section, passage.text)).lastrowid
                db.execute("INSERT INTO terms (rowid, body) VALUES (?, ?)", (row_id, passage.searchable))
        return document is not None

    def search(self, text: str, folders: Iterable[Path], k: int, documents: Collection[str] = ()) -> list[Found]:
        """The `k` best passages of `folders` for `text` (of the `documents` with those paths, when given), best
        first, each with its whole document; none when no term matches."""
        query = " OR ".join('"' + term.replace('"', '""') + '"' for term in dict.fromkeys(terms(text, self.pairs)))
        keys = [str(folder.resolve()) for folder in folders]
        if not query or not keys:
            return []
        only = f"AND d.path IN ({', '.join('?' * len(documents))})" if documents else ""
        with closing(self._connect()) as db:
            rows = db.execute(
                "SELECT d.id, d.path, d.title, p.section, p.text, -bm25(terms) AS score FROM terms "
                "JOIN passages p ON p.id = terms.rowid JOIN documents d ON d.id = p.document "
                f"WHERE terms MATCH ? AND d.folder IN ({', '.join('?' * len(keys))}) {only} ORDER BY score DESC LIMIT ?",
                (query, *keys, *documents, k)).fetchall()
            wholes = {number: _whole(db, number) for number in {row[0] for row in rows}}
        return [Found(*row[1:], document=wholes[row[0]]) for row in rows]

    def names(self, folders: Iterable[Path]) -> dict[str, tuple[str, ...]]:
        """Each readable document of `folders` (its path) with the names it goes by: its title's (`places.sight`), each
        part of a title that joins two ("永庆坊与荔枝湾": 永庆坊, 荔枝湾), and its other names."""
        keys = [str(folder.resolve()) for folder in folders]
        with closing(self._connect()) as db:
            rows = db.execute(f"SELECT path, title, aliases FROM documents WHERE problem = '' AND folder IN "
                              f"({', '.join('?' * len(keys))})", keys).fetchall()
        return {path: _names(title, aliases) for path, title, aliases in rows}

    def holding(self, words: Iterable[str], folders: Iterable[Path], rare: int) -> dict[str, Held]:
        """Each of `words` (search terms) with the readable documents of `folders` (their paths) that hold it, in a
        passage or a name, and, for a word at most `rare` documents hold, those of them that describe it as a thing
        (`describes`; a common word's passages are not read)."""
        keys = [str(folder.resolve()) for folder in folders]
        match = ("FROM terms JOIN passages p ON p.id = terms.rowid JOIN documents d ON d.id = p.document WHERE terms MATCH "
                 f"? AND d.problem = '' AND d.folder IN ({', '.join('?' * len(keys))})")
        held = {}
        with closing(self._connect()) as db:
            for word in dict.fromkeys(words):
                query = ('"' + word.replace('"', '""') + '"', *keys)
                by = frozenset(path for path, in db.execute(f"SELECT DISTINCT d.path {match}", query))
                rows = db.execute(f"SELECT d.path, d.title, d.aliases, p.text {match}", query) if len(by) <= rare else ()
                held[word] = Held(by, frozenset(path for path, *texts in rows if describes(word, *texts)))
        return held

    def places(self, folders: Iterable[Path]) -> frozenset[str]:
        """The places the documents of `folders` know (`retrieval.places`): districts and stations, and the names of
        the entries that give one."""
        keys = [str(folder.resolve()) for folder in folders]
        found: set[str] = set()
        with closing(self._connect()) as db:
            for title, text in db.execute(f"SELECT d.title, p.text FROM passages p JOIN documents d ON d.id = p.document "
                                          f"WHERE d.problem = '' AND d.folder IN ({', '.join('?' * len(keys))})", keys):
                if given := places_in(text):
                    found |= given | ({sight(title)} - {""})
        return frozenset(found)


    def documents(self, folders: Iterable[Path]) -> dict[str, tuple[str, float]]:
        """The readable documents of `folders`: each file name without extension, with the document's title and
        the time it was last changed (Unix time, as indexed)."""
        keys = [str(folder.resolve()) for folder in folders]
        with closing(self._connect()) as db:
            rows = db.execute(f"SELECT path, title, stamp FROM documents WHERE problem = '' AND folder IN "
                              f"({', '.join('?' * len(keys))})", keys).fetchall()
        return {Path(path).stem: (title, int(stamp.split(":")[1]) / 1e9) for path, title, stamp in rows}


    def contents(self, folder: Path) -> dict[str, IndexedFile]:
        """Each file of `folder` as indexed, by its name within the folder: title, why it was skipped (or ""), and
        its passages as the guide reads them."""
        key = str(folder.resolve())
        with closing(self._connect()) as db:
            rows = db.execute("SELECT d.path, d.title, d.problem, p.section, p.text FROM documents d LEFT JOIN passages p "
                              "ON p.document = d.id WHERE d.folder = ? ORDER BY d.path, p.id", (key,)).fetchall()
        found: dict[str, IndexedFile] = {}
        for path, title, problem, section, text in rows:
            name = str(Path(path).relative_to(key))
            entry = found.setdefault(name, IndexedFile(title, problem, []))
            if text is not None:
                entry.passages.append((section, text))
        return found


@dataclass(frozen=True)
class IndexedFile:
    title: str
    problem: str  # why it could not be read, or ""
    passages: list[tuple[str, str]]  # (section, text)


def _stamp(path: Path) -> str:
    status = path.stat()
    return f"{READER_VERSION}:{status.st_mtime_ns}:{status.st_size}"


def _names(title: str, aliases: str) -> tuple[str, ...]:
    name = sight(title)
    parts = name.split("与") if "与" in name else []
    return tuple(other for other in [name, *parts, *re.split("[;；]", aliases)] if other.strip())


def _whole(db: sqlite3.Connection, document: int) -> str:
    """A document as the index holds it: its title, then its passages (each under its headings)."""
    title, = db.execute("SELECT title FROM documents WHERE id = ?", (document,)).fetchone()
    texts = [text for text, in db.execute("SELECT text FROM passages WHERE document = ? ORDER BY id", (document,))]
    return "\n\n".join([title, *texts])


def _forget(db: sqlite3.Connection, document: int) -> None:
    db.execute("DELETE FROM terms WHERE rowid IN (SELECT id FROM passages WHERE document = ?)", (document,))
    db.execute("DELETE FROM passages WHERE document = ?", (document,))
    db.execute("DELETE FROM documents WHERE id = ?", (document,))
