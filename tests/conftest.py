"""Shared fixtures: the tiny model (built once per run), one real engine, one running app, one browser; and
each test's tier. The helpers tests share are in `tests/support.py`.

Everything expensive is session-scoped and shared. Nothing here downloads anything. A failed test that used a
running app shows the end of that app's log (what CI prints is all there is of a run elsewhere).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.app_process import AppProcess
from harness.browser import launch_chromium
from tests.support import ARTIFACTS, RunningApp, copy_guide_index
from tests.tiny_model import build_tiny_qwen


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test has a tier: fast and e2e are marked where the test is; all others are integration tests."""
    for item in items:
        if not item.get_closest_marker("fast") and not item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
    report = yield
    if report.failed:
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, AppProcess):
                report.sections.append((f"the end of {value.log_path.name}", value.log()[-4000:]))
    return report


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


@pytest.fixture
def index(tmp_path: Path):
    """The guide indexed, in a file of this test's own (a copy: a test may index more folders into it)."""
    from retrieval.index import KnowledgeIndex

    copy_guide_index(tmp_path / "knowledge.db")
    return KnowledgeIndex(tmp_path / "knowledge.db")
