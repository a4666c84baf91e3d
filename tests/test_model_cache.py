"""Cache folders are used only when complete and intact; anything else is rebuilt."""

import pytest

from modelprep.cache import MANIFEST, build_once, is_complete

pytestmark = pytest.mark.fast


def write_two_files(folder):
    (folder / "a.txt").write_text("alpha")
    (folder / "b.bin").write_bytes(b"\0" * 1000)


def test_built_once_then_reused(tmp_path):
    builds = []
    folder = tmp_path / "model"
    for _ in range(2):
        assert build_once(folder, lambda out: (builds.append(out), write_two_files(out))) == folder
    assert len(builds) == 1 and is_complete(folder)
    assert not (tmp_path / "model.partial").exists()


@pytest.mark.parametrize("damage", [
    lambda folder: (folder / "b.bin").write_bytes(b"\0" * 999),  # truncated
    lambda folder: (folder / "a.txt").write_text("alphA"),  # same size, other bytes
    lambda folder: (folder / "a.txt").unlink(),
    lambda folder: (folder / MANIFEST).unlink(),  # never finished
])
def test_damaged_folder_is_not_complete_and_gets_rebuilt(tmp_path, damage):
    folder = build_once(tmp_path / "model", write_two_files)
    damage(folder)
    assert not is_complete(folder)
    build_once(folder, write_two_files)
    assert is_complete(folder) and (folder / "a.txt").read_text() == "alpha"


def test_interrupted_build_leaves_nothing_that_looks_finished(tmp_path):
    def crash(out):
        (out / "a.txt").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_once(tmp_path / "model", crash)
    assert not (tmp_path / "model").exists() and not is_complete(tmp_path / "model")
    assert build_once(tmp_path / "model", write_two_files) and is_complete(tmp_path / "model")
