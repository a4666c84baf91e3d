"""The rule each folder keeps (docs/architecture.md): whom it may import, read from the code's own imports, and no
circle of imports between modules. Chainlit and vLLM stay where they belong too."""

import ast
import re
import tomllib

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.fast

# Each folder and the folders of ours it may import; a folder not named here may import none.
MAY_IMPORT = {
    "app": {"assembly", "chat", "ui", "history", "config"},
    "assembly": {"chat", "ui", "web", "telemetry", "insights", "history", "retrieval", "engine", "config"},
    "chat": {"ui", "telemetry", "insights", "history", "retrieval", "engine", "config"},
    "web": {"telemetry", "insights", "history", "retrieval", "engine", "config"},
    "ui": {"engine", "config"},
    "telemetry": {"engine", "config"},
    "insights": {"history", "retrieval", "config"},
    "history": {"config"},
    "retrieval": {"config"},
    "engine": {"modelprep", "config"},
    "modelprep": {"config"},
    "config": set(),
    "harness": {"modelprep", "config"},
    "bench": {"harness", "telemetry", "insights", "history", "retrieval", "engine", "modelprep", "config"},
    "deploy": {"modelprep", "config"},
}
OURS = set(MAY_IMPORT) | {"tests"}
TOP_LEVEL = {"app", "assembly"}  # modules beside the folders: Chainlit's handlers, and the app assembled
# Folders that never import a package: the engine and what it stands on know no Chainlit (history's store is Chainlit's
# data layer, so it may), and what faces the browser knows no vLLM.
NEVER = {"chainlit": {"engine", "modelprep", "config", "retrieval", "telemetry", "insights"},
         "vllm": {"app", "assembly", "chat", "ui", "web", "insights"}}


def modules() -> dict[str, set[str]]:
    """Each module of ours (outside tests) by dotted name, with every module it imports, at any depth of its code."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.with_suffix("").parts[0] not in MAY_IMPORT:
            continue
        name = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        found[name] = imported
    return found


def test_every_folder_imports_only_the_folders_below_it():
    broken = set()
    for name, imported in modules().items():
        folder = name.split(".")[0]
        for target in imported:
            top = target.split(".")[0]
            if top in OURS and top != folder and top not in MAY_IMPORT[folder]:
                broken.add(f"{name} imports {top}")
            if folder in NEVER.get(top, ()):
                broken.add(f"{name} imports {top}")
    assert not broken, sorted(broken)


def test_no_module_imports_itself_through_others():
    graph = modules()
    edges = {name: {target for target in imported if target in graph and target != name}
             for name, imported in graph.items()}
    done: set[str] = set()

    def circle_from(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return path[path.index(name):] + [name]
        if name in done:
            return None
        for target in edges[name]:
            if found := circle_from(target, [*path, name]):
                return found
        done.add(name)
        return None

    circles = [circle for name in edges if (circle := circle_from(name, []))]
    assert not circles, circles[0]


def test_every_folder_of_code_has_a_rule():
    folders = {path.relative_to(ROOT).parts[0] for path in ROOT.glob("*/**/*.py")
               if not path.relative_to(ROOT).parts[0].startswith((".", "_")) and "node_modules" not in path.parts}
    assert folders - {"tests"} <= set(MAY_IMPORT), folders - set(MAY_IMPORT)


def test_no_two_modules_share_a_name():
    """A name says which module it is: `bench/operator.py` beside `web/operator.py` sent readers to the wrong one."""
    seen: dict[str, list[str]] = {}
    for name in modules():
        if name.split(".")[-1] not in {"__main__"} and "." in name:
            seen.setdefault(name.split(".")[-1], []).append(name)
    assert not {stem: names for stem, names in seen.items() if len(names) > 1}


def test_the_architecture_page_and_the_packages_name_the_folders_as_the_rule_does():
    """docs/architecture.md's table says what each folder may import, as `MAY_IMPORT` does; pyproject.toml installs
    every folder of code."""
    rows = [line.split(" | ") for line in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `")]
    table = {row[0].strip("| `/").removesuffix(".py"): set(re.findall(r"`(\w+)`", row[2])) - {"nothing"}
             for row in rows}
    assert table == MAY_IMPORT
    found = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    installed = {name.rstrip("*") for name in found["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert installed == set(MAY_IMPORT) - TOP_LEVEL | {"tests"}


def test_the_testing_page_lists_every_test_file():
    listed = set(re.findall(r"^\| `tests/(test_\w+\.py)` \|", (ROOT / "docs" / "testing.md").read_text(encoding="utf-8"),
                            re.M))
    assert listed == {path.name for path in (ROOT / "tests").glob("test_*.py")}
