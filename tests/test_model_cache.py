"""Cache folders are used only when complete and intact; anything else is rebuilt."""

import json
import os

import pytest

from modelprep import cache
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


@pytest.fixture
def reads(monkeypatch):
    """The names of the files `is_complete` reads in full, in order."""
    names = []
    real = cache.file_sha256
    monkeypatch.setattr(cache, "file_sha256", lambda path: (names.append(path.name), real(path))[1])
    return names


def _age(folder, seconds=60):
    for path in folder.iterdir():
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns - seconds * 10**9))


def test_a_full_check_is_remembered_until_a_file_changes(tmp_path, reads):
    folder = build_once(tmp_path / "model", write_two_files)
    _age(folder)  # built a minute ago
    reads.clear()  # what building it read
    assert is_complete(folder) and sorted(reads) == ["a.txt", "b.bin"]  # read in full once
    assert is_complete(folder) and len(reads) == 2  # then trusted: nothing read
    assert is_complete(folder, thorough=True) and len(reads) == 4  # unless asked (a copy just made)
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["a.txt"]["sha256"] = "0" * 64  # a manifest that no longer vouches for the files
    (folder / MANIFEST).write_text(json.dumps(manifest))
    assert not is_complete(folder) and len(reads) > 4
    (folder / "a.txt").write_text("alphA")  # same size, other bytes, a later time
    assert not is_complete(folder) and "a.txt" in reads[4:]


def test_a_file_written_within_the_checks_clock_tick_is_read_every_time(tmp_path, reads):
    folder = build_once(tmp_path / "model", write_two_files)
    assert is_complete(folder)
    record = folder / cache.VERIFIED
    written = (folder / "a.txt").stat().st_mtime_ns
    os.utime(record, ns=(written, written))  # as if the check ran in the tick the file was written
    reads.clear()
    assert is_complete(folder) and "a.txt" in reads
