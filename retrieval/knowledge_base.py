"""The app's knowledge base: which folders each persona answers from, indexed once at start on a thread of its own
and kept in step with the disk as it changes (the folders watched by watchfiles: a file copied in is indexed a second
after the copy ends), and again every `RESCAN_SECONDS` for the disks that send no events (network shares); and the
search a reply makes.

Every persona uses the operators' folder (`CHAT_KNOWLEDGE_DIR`); a persona's file may add folders of its own
(`knowledge = ["knowledge"]`). Indexing never stops the app: a file that cannot be read is logged and skipped, and
a failure of the whole pass is logged and tried again at the next rescan.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import watchfiles

from config.message import Message
from retrieval.grounding import focused, search_for, within
from retrieval.index import Found, KnowledgeIndex
from retrieval.reading import SUFFIXES

log = logging.getLogger(__name__)

RESCAN_SECONDS = 10.0
QUIET_AT_MOST_MS = 30_000  # files changing without a pause for this long are read meanwhile
TOP_K = 2
PROGRESS_SECONDS = 5.0
RELATIVE_FLOOR = 0.4  # passages scoring below this share of the best one are left out


@dataclass(frozen=True)
class Progress:
    folder: Path | None  # being indexed now; None once the first pass is done
    done: int
    total: int


class KnowledgeBase:
    def __init__(self, index_path: Path, shared: Path, persona_folders: dict[str, tuple[Path, ...]]) -> None:
        self.index = KnowledgeIndex(index_path)
        self.shared = shared
        self.persona_folders = persona_folders
        self.progress = Progress(None, 0, 0)
        self.ready = threading.Event()
        self._passages: dict[Path, int] = {}  # passages in each folder, as of the last pass
        self._places: dict[tuple[Path, ...], frozenset[str]] = {}  # the places each persona's folders know
        self._names: dict[tuple[Path, ...], dict[str, tuple[str, ...]]] = {}  # their documents' names
        self._logged = time.monotonic()
        self._syncing = threading.Lock()  # one pass at a time: the rescan's, or one after an operator's change

    def folders(self, persona: str) -> tuple[Path, ...]:
        return (*self.persona_folders.get(persona, ()), self.shared)

    def all_folders(self) -> tuple[Path, ...]:
        return tuple(dict.fromkeys([*(folder for folders in self.persona_folders.values() for folder in folders),
                                    self.shared]))

    def in_use(self, persona: str) -> bool:
        """Whether this persona has any passage to answer from (its rules then go into its system prompt)."""
        return any(self._passages.get(folder) for folder in self.folders(persona))

    def start(self) -> None:
        threading.Thread(target=self._run, name="knowledge", daemon=True).start()

    def _run(self) -> None:
        self.sync_all(first=True)
        self.ready.set()
        while True:
            watched = self._existing_folders()
            if not watched:
                time.sleep(RESCAN_SECONDS)
                self.sync_all(first=False)
                continue
            # Changes, once the folders have been quiet for a second (a file being copied in is read once, whole),
            # or RESCAN_SECONDS without one, bring a pass; a folder made or removed meanwhile starts the watch again
            # over the folders there are.
            for _ in watchfiles.watch(*watched, watch_filter=_document, step=1000, debounce=QUIET_AT_MOST_MS,
                                      yield_on_timeout=True, rust_timeout=int(RESCAN_SECONDS * 1000),
                                      raise_interrupt=False):
                self.sync_all(first=False)
                if self._existing_folders() != watched:
                    break

    def _existing_folders(self) -> list[Path]:
        return [folder for folder in self.all_folders() if folder.is_dir()]

    def sync_all(self, first: bool) -> None:
        """Bring the index in step with every folder (also called after the operator's page changed a document, so
        a visitor's next question finds it)."""
        with self._syncing:
            for folder in self.all_folders():
                try:
                    report = self.index.sync(folder, functools.partial(self._show, folder, first=first))
                except Exception:  # the disk or the index failed: log it, keep serving, try again at the next rescan
                    log.exception("Knowledge: indexing %s failed; the next try is in %.0f s", folder, RESCAN_SECONDS)
                    continue
                self._passages[folder] = report.passages
                if report.indexed or report.removed:
                    self._places.clear()
                    self._names.clear()
                if first or report.indexed or report.removed:
                    log.info("Knowledge: %s: %d files, %d passages (%d read now, %d removed, %d skipped) in %.2f s",
                             folder, report.files, report.passages, report.indexed, report.removed, report.skipped,
                             report.seconds)
            self.progress = Progress(None, 0, 0)

    def _show(self, folder: Path, done: int, total: int, first: bool) -> None:
        if first:
            self.progress = Progress(folder, done, total)
        if time.monotonic() - self._logged >= PROGRESS_SECONDS:  # a long pass says how far it is
            self._logged = time.monotonic()
            log.info("Knowledge: indexing %s: %d of %d files", folder, done, total)

    def places(self, persona: str) -> frozenset[str]:
        """The places the persona's documents know, for checking replies (`KnowledgeIndex.places`), read again once
        a file changed."""
        folders = self.folders(persona)
        if folders not in self._places:
            self._places[folders] = self.index.places(folders)
        return self._places[folders]

    def search(self, persona: str, history: list[Message], budget: int,
               length: Callable[[str], int] = len) -> list[Found]:
        """The passages to put before the newest question of `history`, best first, each cut to the sentences that
        bear on it, within `budget` as `length` measures it (`grounding.within`)."""
        folders = self.folders(persona)
        if folders not in self._names:  # read from the index once it changes, not for every question
            self._names[folders] = self.index.names(folders)
        search = search_for(history, self._names[folders], functools.partial(self.index.holding, folders=folders))
        found = self.index.search(search.text, folders, TOP_K, search.documents)
        found = [passage for passage in found if passage.score >= RELATIVE_FLOOR * found[0].score]
        return within(focused(found, history[-1]["content"]), budget, length)


def _document(change: watchfiles.Change, path: str) -> bool:
    """A change the index cares about: to a file of a format it reads (or a folder, which may hold some)."""
    return Path(path).suffix.lower() in SUFFIXES or not Path(path).suffix
