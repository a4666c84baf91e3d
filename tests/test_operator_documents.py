"""The operator keeps the guide from the browser (issue 51), in the real app on the scripted engine: documents
uploaded (a PDF and a Markdown file, from the page in Chromium), found by a visitor's next question and named as its
source, deleted and restored; an answer written under an unanswered question and found by the next wording of it;
"try a question" on a phone; the activity list with each operator's name; and the doors: every write route refused
to a visitor, an anonymous client, an allowed widget site and a cookie without the page's form token, a 100 MB upload
refused before it is read, names cleaned. The fake engine's `[quote]` replies repeat the prompt, so the passages a
reply was given show in it, and the reply names its sources."""

from __future__ import annotations

import asyncio
import csv
import io
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
import pytest

from harness.visitor import visit
from history.conversation import SOURCES_MARK
from tests.fake_engine import QUOTE
from tests.support import ARTIFACTS, login_cookie, login_headers, operators_site, pdf_with_text, smaps_rollup_pss

TOKEN = "operator-token-for-documents-test-0123"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
WIDGET_SITE = "http://museum.example"
MARKDOWN = "# 荔湾博物馆\n\n## 开放时间\n\n荔湾博物馆每周一闭馆，周二至周日九点开门，门票免费。\n"
FERRY = ["Harbour Ferry Notes", "The night ferry leaves Tianzi Pier at 19:30.", "Tickets cost 48 yuan on board."]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    running = operators_site(tmp_path_factory.mktemp("documents-state"), "app-operator-documents.log",
                             CHAT_OPERATOR_TOKEN=TOKEN, CHAT_ALLOWED_ORIGINS=WIDGET_SITE)
    running.folder_of_documents = running.state / "documents"
    yield running
    running.stop()


def ask(site, question: str) -> str:
    """A new chat of the visitor bob's, one question; the reply as sent, sources included."""
    async def one() -> str:
        visitor = await visit(site.url, login_headers(site.url, "bob"))
        await visitor.ask_and_wait(question)
        await visitor.socket.disconnect()
        return visitor.replies()[-1]

    with ThreadPoolExecutor(1) as pool:  # its own event loop, beside Playwright's
        return pool.submit(asyncio.run, one()).result()


def logged_in(browser, site, name: str, **context):
    page = browser.new_context(locale="zh-CN", **context).new_page()
    page.context.add_cookies([{"name": "access_token", "value": login_cookie(site.url, name).split("=", 1)[1],
                               "url": site.url}])
    return page


def test_uploaded_documents_answer_the_next_visitor_and_a_deleted_one_comes_back(site, browser, tmp_path):
    pdf_with_text(tmp_path / "ferry.pdf", FERRY)
    (tmp_path / "荔湾博物馆.md").write_text(MARKDOWN, encoding="utf-8")
    page = logged_in(browser, site, "alice")
    page.goto(f"{site.url}/operator")
    page.set_input_files("[data-upload] input[type=file]", [str(tmp_path / "ferry.pdf"), str(tmp_path / "荔湾博物馆.md")])
    started = time.monotonic()
    page.click("[data-upload] button")
    page.wait_for_url(f"{site.url}/operator#documents")
    listed = page.locator("[data-operator-documents] tr[data-document]")
    assert sorted(listed.nth(index).get_attribute("data-document") for index in range(listed.count())) == \
        ["ferry.pdf", "荔湾博物馆.md"]
    assert "1 段落" in page.locator('tr[data-document="ferry.pdf"]').inner_text()

    museum = ask(site, f"荔湾博物馆周一开门吗？{QUOTE}")
    ferry = ask(site, f"When does the night ferry leave Tianzi Pier? {QUOTE}")
    assert time.monotonic() - started < 20
    assert "每周一闭馆" in museum and f"{SOURCES_MARK}荔湾博物馆 · 开放时间" in museum
    assert "19:30" in ferry and f"{SOURCES_MARK}ferry" in ferry
    page.screenshot(path=str(ARTIFACTS / "operator-documents.png"), full_page=True)

    page.locator('tr[data-document="荔湾博物馆.md"] [data-delete]').click()
    page.wait_for_url(f"{site.url}/operator#documents")
    assert page.locator('tr[data-document="荔湾博物馆.md"]').count() == 0
    assert not (site.folder_of_documents / "荔湾博物馆.md").exists()
    assert "《荔湾博物馆》" not in ask(site, f"荔湾博物馆周一开门吗？{QUOTE}")
    page.locator("tr[data-kept] [data-restore]").first.click()
    page.wait_for_url(f"{site.url}/operator#documents")
    assert page.locator('tr[data-document="荔湾博物馆.md"]').count() == 1
    assert (site.folder_of_documents / "荔湾博物馆.md").read_text(encoding="utf-8") == MARKDOWN
    assert f"{SOURCES_MARK}荔湾博物馆 · 开放时间" in ask(site, f"荔湾博物馆几点开门？{QUOTE}")

    actions = [(row.get_attribute("data-activity"), row.locator("td").nth(1).inner_text())
               for row in page.locator("[data-operator-activity] tr[data-activity]").all()]
    assert actions[:4] == [("restore", "alice"), ("delete", "alice"), ("upload", "alice"), ("upload", "alice")]
    listed = httpx.get(f"{site.url}/operator/documents.json", headers=BEARER, timeout=30).json()
    museum_entry = next(document for document in listed["documents"] if document["name"] == "荔湾博物馆.md")
    assert museum_entry["passages"][0][0] == "开放时间" and museum_entry["replies"] >= 2
    assert any("荔湾博物馆" in question for question, _ in museum_entry["questions"])


def test_an_answer_written_for_an_unanswered_question_answers_its_next_wording(site, browser):
    ask(site, "荔湾湖公园的游船几点停止售票？")  # not in the guide: listed as unanswered
    page = logged_in(browser, site, "alice")
    page.goto(f"{site.url}/operator")
    row = page.locator("tr[data-unanswered]", has_text="荔湾湖公园的游船几点停止售票")
    row.locator("[data-write-answer] summary").click()
    row.locator("textarea[name=answer]").fill("荔湾湖公园的游船每天下午五点停止售票，六点收船。")
    row.locator("[data-write-answer] button").click()
    page.wait_for_url(f"{site.url}/operator#documents")
    entry = site.folder_of_documents / "荔湾湖公园的游船几点停止售票.md"
    assert entry.read_text(encoding="utf-8").startswith("# 荔湾湖公园的游船几点停止售票\n\n别名：荔湾湖公园的游船几点停止售票？")

    reply = ask(site, f"荔湾湖游船售票到几点？{QUOTE}")
    assert "下午五点停止售票" in reply and f"{SOURCES_MARK}荔湾湖公园的游船几点停止售票" in reply
    page.goto(f"{site.url}/operator")
    answered = page.locator("tr[data-unanswered]", has_text="荔湾湖公园的游船几点停止售票？")
    assert answered.get_attribute("data-answered") is not None and "✓ 荔湾湖公园的游船几点停止售票" in answered.inner_text()

    by_script = httpx.post(f"{site.url}/operator/answers", headers=BEARER, timeout=30, json={
        "question": "沙面有没有共享单车？", "answer": "沙面岛上有共享单车停放点，在沙面大街东口。", "title": "沙面共享单车"})
    assert by_script.status_code == 200, by_script.text
    assert by_script.json()["files"][0]["passages"] == 1
    assert "令牌 token" in httpx.get(f"{site.url}/operator/activity.csv", headers=BEARER, timeout=30).text
    rows = list(csv.DictReader(io.StringIO(httpx.get(f"{site.url}/operator/activity.csv", headers=BEARER,
                                                     timeout=30).text)))
    assert [(row["action"], row["operator"]) for row in rows[:2]] == [("answer", "令牌 token"), ("answer", "alice")]


def test_try_a_question_on_a_phone_shows_passages_what_the_model_reads_and_a_preview(site, browser):
    (site.folder_of_documents / "海心沙.md").write_text("# 海心沙\n\n## 交通\n\n海心沙在珠江边，地铁花城大道站步行十分钟。\n",
                                                       encoding="utf-8")
    time.sleep(11)  # the rescan indexes a file copied in by hand
    page = logged_in(browser, site, "alice", viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page.goto(f"{site.url}/operator")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390 + 1  # no part of the page off the screen
    delete = page.locator("[data-delete]").first.bounding_box()  # nor a form's button, off its section's side
    assert delete["x"] + delete["width"] <= 390
    page.fill("[data-operator-try] input[name=question]", f"海心沙怎么去？{QUOTE}")
    page.locator("[data-operator-try] button").tap()
    page.wait_for_selector("[data-reads]")
    assert "海心沙 · 交通" in page.inner_text("body") and "花城大道站" in page.inner_text("[data-reads]")
    page.locator("[data-see-reply]").tap()
    preview = page.wait_for_selector("[data-preview-reply]")
    assert "花城大道站" in preview.inner_text()  # the scripted engine repeats the prompt it was given
    page.screenshot(path=str(ARTIFACTS / "operator-try-phone.png"), full_page=True)
    before = httpx.get(f"{site.url}/operator/usage.json?days=1", headers=BEARER, timeout=30).json()["total"]
    assert httpx.post(f"{site.url}/operator/try", headers=BEARER, data={"question": "海心沙怎么去？"},
                      timeout=30).json()["preview"]
    after = httpx.get(f"{site.url}/operator/usage.json?days=1", headers=BEARER, timeout=30).json()["total"]
    assert after["questions"] == before["questions"]  # a preview is not a visitor's question


WRITES = [("POST", "/operator/documents"), ("DELETE", "/operator/documents/x.md"), ("POST", "/operator/documents/x.md"),
          ("POST", "/operator/restore/x"), ("POST", "/operator/answers"), ("POST", "/operator/try")]


@pytest.mark.fast
def test_every_write_route_is_for_the_operators_own_page_only(site):
    alice, bob = login_headers(site.url, "alice"), login_headers(site.url, "bob")
    for method, route in WRITES:
        for headers in ({}, bob, alice | {"Origin": WIDGET_SITE}, BEARER | {"Origin": WIDGET_SITE}):
            answer = httpx.request(method, site.url + route, headers=headers, data={"action": "delete"}, timeout=30)
            assert answer.status_code == 403, (method, route, headers)
        forged = httpx.request(method, site.url + route, headers=alice, data={"action": "delete", "csrf": "x"},
                               timeout=30)  # a cookie, but not the page's form token
        assert forged.status_code == 403 and "form token" in forged.json()["detail"], (method, route)
    page = httpx.get(f"{site.url}/operator", headers=alice, timeout=30).text
    token = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    answered = httpx.post(f"{site.url}/operator/documents", headers=alice, timeout=30, data={"csrf": token},
                          files={"file": ("page-token.md", "# 页面令牌\n\n用页面的表单令牌上传。\n".encode())})
    assert answered.status_code == 200 and answered.json()["files"][0]["passages"] == 1


@pytest.mark.fast
def test_names_are_cleaned_and_nothing_is_overwritten_unasked(site):
    def upload(name: str, body: bytes = b"# x\n\ntext\n", **data) -> httpx.Response:
        return httpx.post(f"{site.url}/operator/documents", headers=BEARER, files={"file": (name, body)}, data=data,
                          timeout=30)

    assert upload("../../x.md").json()["files"][0]["file"] == "x.md"
    assert (site.folder_of_documents / "x.md").is_file()
    assert not (site.folder_of_documents.parent.parent / "x.md").exists()
    assert upload("..\\..\\.hidden.md").json()["files"][0]["file"] == "hidden.md"
    refused = upload("setup.exe")
    assert refused.status_code == 400 and "not a kind of document" in refused.json()["files"][0]["error"]
    again = upload("x.md", b"# x\n\nnew text\n")
    assert again.status_code == 409 and "replace" in again.json()["files"][0]["error"]
    assert upload("x.md", b"# x\n\nnew text\n", replace="1").json()["files"][0]["replaced"]
    assert (site.folder_of_documents / "x.md").read_text() == "# x\n\nnew text\n"
    kept = httpx.get(f"{site.url}/operator/documents.json", headers=BEARER, timeout=30).json()["kept"]
    assert any(item["name"] == "x.md" and item["why"] == "replaced" for item in kept)
    broken = upload("坏文件.pdf", b"not a pdf at all")  # saved, and listed with why the reader could not read it
    assert broken.status_code == 200 and broken.json()["files"][0]["unreadable"]
    gone = httpx.delete(f"{site.url}/operator/documents/x.md", headers=BEARER, timeout=30)
    assert gone.status_code == 200 and not (site.folder_of_documents / "x.md").exists()
    assert httpx.delete(f"{site.url}/operator/documents/x.md", headers=BEARER, timeout=30).status_code == 404


@pytest.mark.fast
def test_a_100_mb_upload_is_refused_before_it_is_read(site):
    app = psutil.Process(site.process.pid)
    before = sum(smaps_rollup_pss(process.pid) for process in [app, *app.children(recursive=True)])
    with socket.create_connection(("127.0.0.1", site.port), timeout=30) as declared:  # says 100 MB, sends none
        declared.sendall(f"POST /operator/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
                         f"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: {100 * 2 ** 20}\r\n\r\n"
                         .encode())
        answer = b"".join(iter(lambda: declared.recv(4096), b"")).decode()  # until the app closes it
    assert answer.startswith("HTTP/1.1 413") and "20 MB" in answer

    def chunks():  # no declared length: counted as it arrives
        yield b'--x\r\nContent-Disposition: form-data; name="file"; filename="big.md"\r\n\r\n'
        for _ in range(100):
            yield b"a" * 2 ** 20

    try:
        streamed = httpx.post(f"{site.url}/operator/documents", headers=BEARER | {
            "Content-Type": "multipart/form-data; boundary=x"}, content=chunks(), timeout=60)
        assert streamed.status_code == 413
    except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError):
        pass  # refused and closed while the client was still sending: as good as a 413
    after = sum(smaps_rollup_pss(process.pid) for process in [app, *app.children(recursive=True)])
    assert (after - before) / 2 ** 20 < 50
    assert not (site.folder_of_documents / "big.md").exists()
