"""Shared fixtures: the tiny model (built once per run), one real engine, one running app, one browser; and
each test's tier.

Everything expensive is session-scoped and shared. Nothing here downloads anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.app_process import AppProcess
from harness.browser import launch_chromium
from tests.tiny_model import build_tiny_qwen
from web.accounts import UsersFile

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test has a tier: fast and e2e are marked where the test is; all others are integration tests."""
    for item in items:
        if not item.get_closest_marker("fast") and not item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen(tmp_path_factory.mktemp("models") / "tiny-qwen2")


@pytest.fixture(scope="session")
def paced_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 440 MB of random weights that stream some 20 tokens/s here, as a real CPU model does."""
    return build_tiny_qwen(tmp_path_factory.mktemp("models") / "paced-qwen2", hidden_size=1536, num_layers=12)


@pytest.fixture(scope="session")
def demo_model_dir() -> Path:
    """The bundled 0.5B demo model, which ./test.sh's set-up prepares: a test never downloads it."""
    from config.errors import ChatError
    from config.settings import load_settings
    from modelprep.source import resolve_model

    try:
        return resolve_model("demo-0.5b", load_settings().cache_dir, prepare=False)
    except ChatError as error:
        pytest.fail(f"{error} (./test.sh prepares it before running the tests)")


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def engine(tiny_model_dir: Path):
    from config.settings import load_settings
    from engine.vllm_engine import VllmEngine

    settings = load_settings({"CHAT_MODEL": str(tiny_model_dir), "CHAT_KV_CACHE_GIB": "1",
                              "CHAT_MAX_MODEL_LEN": "2048"})
    chat_engine = VllmEngine.load(settings, tiny_model_dir)
    yield chat_engine
    chat_engine.shutdown()


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
    ready in seconds."""

    def __init__(self, log_path: Path, host: str = "127.0.0.1", **env: str) -> None:
        super().__init__("", log_path, command="tests.fake_app", host=host, **env)


def operators_site(state: Path, log_name: str, **env: str) -> FakeApp:
    """The real app on the scripted engine with logins (alice an operator, bob a visitor, each's password NAME-password)
    and the operators' documents in `state`/documents, started; `running.state` is `state`."""
    (state / "documents").mkdir()
    users = UsersFile(state / "users.json")
    users.set_password("alice", "alice-password", operator=True)
    users.set_password("bob", "bob-password")
    running = FakeApp(ARTIFACTS / log_name, CHAT_STATE_DIR=str(state), CHAT_USERS_FILE=str(state / "users.json"),
                      CHAT_KNOWLEDGE_DIR=str(state / "documents"), CHAT_MAX_NEW_TOKENS="60", **env)
    running.wait_until_ready(timeout=60)
    running.state = state
    return running


@pytest.fixture(scope="session")
def app(paced_model_dir: Path) -> Iterator[RunningApp]:
    ARTIFACTS.mkdir(exist_ok=True)
    # Greedy, so every reply runs to its budget: about ten seconds, time to watch it stream and stop it.
    with RunningApp(paced_model_dir, ARTIFACTS / "app.log", CHAT_TEMPERATURE="0", CHAT_MAX_NEW_TOKENS="200") as running:
        yield running


@pytest.fixture(scope="module")
def playwright_driver():
    # Module scope: Playwright's sync API keeps an event loop running, which the asyncio tests of
    # other modules must not find.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture
def browser(playwright_driver):
    """A fresh Chromium per test, so one test's page cannot slow the next one down."""
    chromium = launch_chromium(playwright_driver)
    yield chromium
    chromium.close()
