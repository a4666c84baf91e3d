"""Documents that bite, read through `retrieval.reader_process`: a DOCX bomb and an oversized PDF refused unread, a
reader that dies on a file, a link out of the folder, remote images shown as text; each failure logged once and
remembered until the file changes; the event loop keeps ticking while a large folder is indexed."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import psutil
import pytest

from retrieval.index import KnowledgeIndex
from retrieval.reader_process import ReaderProcess, UnreadableError
from tests.support import docx_bomb

pytestmark = pytest.mark.fast


def test_a_docx_bomb_and_an_oversized_pdf_are_refused_unread(tmp_path):
    pdf = tmp_path / "手册.pdf"
    with open(pdf, "wb") as file:
        file.truncate(200 * 2 ** 20)  # 200 MiB
    with pytest.raises(UnreadableError, match="200 MiB, more than the 64 MiB read"):
        ReaderProcess().read(pdf)
    with pytest.raises(UnreadableError, match="inflate to 300 MiB"):
        ReaderProcess().read(docx_bomb(tmp_path / "炸弹.docx"))


def test_a_reader_that_dies_on_a_file_skips_that_file_only_and_it_is_not_read_again(tmp_path, caplog):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "大.md").write_text("# 大\n\n" + "广州塔高六百米。" * 2_000_000)  # seconds to split into words
    (folder / "好.md").write_text("# 好\n\n陈家祠在中山七路。")
    index = KnowledgeIndex(tmp_path / "index.db")
    killed = []

    def kill_the_reader_while_it_reads() -> None:  # as a segmentation fault in a parser would end it
        deadline = time.monotonic() + 30
        while not killed and time.monotonic() < deadline:
            for child in psutil.Process().children():
                if "retrieval.reader_process" in child.cmdline():
                    time.sleep(0.2)
                    child.kill()
                    killed.append(child.pid)
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_reader_while_it_reads)
    killer.start()
    with caplog.at_level(logging.WARNING, "retrieval.index"):
        report = index.sync(folder)
    killer.join()
    assert killed and report.skipped == 1 and report.indexed == 1
    [line] = [record.getMessage() for record in caplog.records]
    assert "大.md: the reader crashed on it (exit code -9)" in line
    assert [found.name for found in index.search("陈家祠", [folder], 3)] == ["好"]
    caplog.clear()
    again = index.sync(folder)  # remembered: not read again, not logged again
    assert again.indexed == 0 and again.skipped == 0 and not caplog.records


def test_a_link_out_of_the_folder_is_not_followed_and_images_are_their_words_whatever_their_brackets(tmp_path, caplog):
    outside = tmp_path / "secret.md"
    outside.write_text("# 机密\n\n服务器密码是 hunter2。")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "链接.md").symlink_to(outside)
    (folder / "图.md").write_text("# 图\n\n沙面的老建筑 ![沙面](http://192.168.1.1/x.png) 见 [地图](http://10.0.0.1/map)。\n\n"
                                  "![参考][r]\n\n[r]: http://10.0.0.2/y.png\n\n<http://10.0.0.3/z>\n\n"
                                  "![地图 [新]](http://192.0.2.7/x.png) ![a\\]b](http://192.0.2.8/y.png) ![分开\n的图]"
                                  "(http://192.0.2.9/z.png)")
    index = KnowledgeIndex(tmp_path / "index.db")
    with caplog.at_level(logging.WARNING, "retrieval.index"):
        report = index.sync(folder)
    assert report.skipped == 1 and "outside the folder; copy the file in instead" in caplog.text
    assert not index.search("服务器密码", [folder], 3)
    [found] = index.search("沙面", [folder], 3)
    assert "](" not in found.text and "![" not in found.text and "<http" not in found.text and "]:" not in found.text
    assert "沙面的老建筑 沙面 见 地图 (http://10.0.0.1/map)" in found.text  # an image is its words, a link keeps its address
    assert "地图 [新] a]b 分开\n的图" in found.text and not any(f"192.{net}" in found.text for net in ("168", "0.2"))


async def test_the_event_loop_keeps_ticking_while_a_large_folder_is_indexed(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for number in range(20):
        (folder / f"文件{number}.md").write_text(f"# 文件{number}\n\n" + "广州的早茶有虾饺、烧卖和肠粉。\n\n" * 2000)
    index = KnowledgeIndex(tmp_path / "index.db")
    indexing = asyncio.create_task(asyncio.to_thread(index.sync, folder))
    gaps = []
    while not indexing.done():
        before = time.perf_counter()
        await asyncio.sleep(0.01)
        gaps.append(time.perf_counter() - before - 0.01)
    report = await indexing
    print(f"Indexed {report.passages} passages of {report.files} files in {report.seconds:.1f} s; the event loop's "
          f"longest stall {max(gaps) * 1000:.0f} ms over {len(gaps)} ticks")
    assert report.files == 20 and max(gaps) < 0.25

