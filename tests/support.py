"""What the tests share, in one place: the project's folders, the app as tests start it (on a test model, or on the
scripted engine), a site with users, logins, the conversations' database read back, and documents made to order.
Fixtures live in `conftest.py`; tests import these by name.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import sqlite3
import tempfile
import uuid
import zipfile
from contextlib import closing
from pathlib import Path

import httpx

from harness.app_process import AppProcess
from harness.visitor import ChatClient
from retrieval.index import KnowledgeIndex
from web.accounts import UsersFile

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
GUIDE = ROOT / "knowledge"  # the guide to Guangzhou the tour guide answers from


def users_file(state: Path, passwords: dict[str, str] | tuple[str, ...], operators: tuple[str, ...] = ()) -> Path:
    """`state`/users.json with these users (a name alone: its password is NAME-password); its path."""
    users = UsersFile(state / "users.json")
    named = passwords if isinstance(passwords, dict) else {name: f"{name}-password" for name in passwords}
    for name, password in named.items():
        users.set_password(name, password, operator=name in operators)
    return state / "users.json"


def login_cookie(url: str, name: str, password: str | None = None) -> str:
    """The `Cookie` header's value of a login (the password NAME-password unless given)."""
    answer = httpx.post(f"{url}/login", data={"username": name, "password": password or f"{name}-password"},
                        timeout=30)
    assert answer.status_code == 200, answer.text
    return f"access_token={answer.cookies['access_token']}"


def rows(database: Path, query: str, *parameters) -> list[tuple]:
    """A query's rows from a conversations' database (`chat.db`)."""
    with sqlite3.connect(database) as connection:
        return connection.execute(query, parameters).fetchall()


def smaps_rollup_pss(pid: int) -> int:
    """The kernel's own PSS figure for one process, in bytes."""
    for line in open(f"/proc/{pid}/smaps_rollup"):
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no Pss line for process {pid}")


class RunningApp(AppProcess):
    """The app on a test model, with a 1 GiB KV cache unless a test says otherwise."""

    def __init__(self, model: Path | str, log_path: Path, **env: str) -> None:
        super().__init__(model, log_path, **{"CHAT_KV_CACHE_GIB": "1", **env})


class FakeApp(AppProcess):
    """The real app on the scripted engine of `tests/fake_engine.py` (`tests/fake_app.py`): no vLLM, no model,
    ready in seconds. A new state folder gets the guide's index as the app leaves it, so the app starts as it
    restarts: the guide's files checked, none read again (reading them is the integration tier's, on the real app)."""

    def __init__(self, log_path: Path, host: str = "127.0.0.1", **env: str) -> None:
        self.own_state = None if "CHAT_STATE_DIR" in env else tempfile.mkdtemp(prefix="fake-app-state-")
        state = Path(env.setdefault("CHAT_STATE_DIR", self.own_state))
        if not (state / "knowledge.db").exists():
            copy_guide_index(state / "knowledge.db")
        super().__init__("", log_path, command="tests.fake_app", host=host, **env)

    def stop(self) -> None:
        super().stop()
        if self.own_state:  # a state folder the caller did not give is this app's to remove
            shutil.rmtree(self.own_state, ignore_errors=True)


@functools.cache
def guide_index() -> Path:
    """The guide indexed once per test process (half a second to four, as busy as the machine is)."""
    folder = Path(tempfile.mkdtemp(prefix="guide-index-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    report = KnowledgeIndex(folder / "knowledge.db").sync(GUIDE)
    assert report.files >= 40 and report.skipped == 0 and report.passages >= report.files
    return folder / "knowledge.db"


def copy_guide_index(to: Path) -> None:
    to.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(guide_index())) as indexed, closing(sqlite3.connect(to)) as copy:
        indexed.backup(copy)


def operators_site(state: Path, log_name: str, **env: str) -> FakeApp:
    """The real app on the scripted engine with logins (alice an operator, bob a visitor, each's password NAME-password)
    and the operators' documents in `state`/documents, started; `running.state` is `state`."""
    (state / "documents").mkdir()
    running = FakeApp(ARTIFACTS / log_name, CHAT_STATE_DIR=str(state),
                      CHAT_USERS_FILE=str(users_file(state, ("alice", "bob"), operators=("alice",))),
                      CHAT_KNOWLEDGE_DIR=str(state / "documents"), CHAT_MAX_NEW_TOKENS="60", **env)
    running.wait_until_ready(timeout=60)
    running.state = state
    return running


def token_views(visitor: ChatClient) -> list[dict]:
    return [element for element in visitor.elements() if element["name"] == "TokenView" and element["props"].get("force")]


def docx_bomb(path: Path) -> Path:
    """A DOCX whose one part inflates to 300 MiB of zeros (300 KiB on disk)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("word/document.xml", "w", force_zip64=True) as part:
            for _ in range(300):
                part.write(b"\0" * 2 ** 20)
    return path


def new_store(database: Path):
    """The data layer (`ChatStore`) on `database`, inside a Chainlit context (a socket's, in the app): here a plain
    HTTP one."""
    from chainlit.context import init_http_context

    from history.store import ChatStore

    init_http_context()
    return ChatStore(database)


def step(thread: str, kind: str, output: str, created: str, **metadata) -> dict:
    return {"id": str(uuid.uuid4()), "name": kind, "type": kind, "threadId": thread, "streaming": False,
            "output": output, "createdAt": created, "metadata": metadata, "defaultOpen": False, "autoCollapse": False,
            "command": None, "modes": {"model": "x"}, "feedback": None, "unknownFutureKey": 1}


def pdf_with_text(path: Path, lines: list[str]) -> None:
    """A one-page PDF whose text layer holds `lines` (ASCII: the standard Helvetica font)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    page = writer.add_blank_page(width=400, height=300)
    font = DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
                             NameObject("/BaseFont"): NameObject("/Helvetica")})
    page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject(
        {NameObject("/F1"): writer._add_object(font)})})
    stream = DecodedStreamObject()
    stream.set_data("".join(f"BT /F1 12 Tf 20 {260 - 20 * n} Td ({line}) Tj ET\n" for n, line in enumerate(lines))
                    .encode())
    page[NameObject("/Contents")] = writer._add_object(stream)
    writer.write(path)


def login_headers(url: str, name: str, password: str | None = None) -> dict[str, str]:
    """The headers of a request made with a login's cookie."""
    return {"Cookie": login_cookie(url, name, password)}
