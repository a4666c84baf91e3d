"""The operator's view: unanswered questions grouped from a real SQLite history, the page's routes for operators only
(a second real login is refused), the CSV the same rows as the page, a document added that answers a question
marking it answered, and the daily limit per user. The app is the real one on the scripted engine
(`tests/fake_app.py`): a question with `[quote]` is answered from the passages it was given (it names its sources),
any other is not, as an uncovered question's reply would be."""

from __future__ import annotations

import asyncio
import csv
import io
import math
import os
import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import httpx
import pytest

from harness.visitor import until, visit
from insights.unanswered import Asked, _similar, grouped, mark_answered, search_terms, unanswered
from retrieval.index import Found
from tests.support import ARTIFACTS, FakeApp, login_headers, operators_site, users_file

NAMES = {"广州塔", "广州", "塔", "陈家祠", "陈家", "家祠", "珠江", "夜游", "珠江夜游", "canton", "tower"}
# Eight questions the guide does not cover, in three questions' wordings, and questions that it covers.
UNCOVERED = ["广州塔现在排队要多久？", "今天去广州塔排队的人多不多？", "广州塔排队大概要等多长时间",
             "陈家祠附近停车多少钱？", "陈家祠停车场收费吗？", "珠江夜游船上有WiFi吗？", "珠江夜游的船上wifi密码是多少",
             "广州塔现在排队要多久？"]
COVERED = ["广州塔有多高", "陈家祠在哪里", "珠江夜游的码头在哪", "沙面在哪个区", "白云山有多高", "越秀公园有什么",
           "广州早茶吃什么", "北京路步行街在哪", "永庆坊有什么好玩的", "广州地铁起步价多少钱", "陈家祠的门票多少钱",
           "中山纪念堂在哪里", "六榕寺有什么", "光孝寺在哪里", "南越王博物院在哪", "广东省博物馆在哪", "海珠湿地在哪",
           "华南植物园在哪里", "沙湾古镇在哪里", "余荫山房在哪里", "上下九步行街在哪", "广州动物园在哪"]


@pytest.mark.fast
def test_wordings_of_one_question_count_once_and_a_sights_name_alone_joins_nothing():
    questions = [*UNCOVERED[:7], "广州塔今天开门吗？", "陈家祠门票多少钱？", "广州塔的高度是多少"]
    asked = [Asked(text, f"2026-12-04T{hour:02d}:00:00.000Z", "tour_guide", "no_source", search_terms(text))
             for hour, text in enumerate(questions)]
    groups = [[question.question for question in group] for group in grouped(asked, NAMES)]
    assert groups == [UNCOVERED[:3], UNCOVERED[3:5], UNCOVERED[5:7], ["广州塔今天开门吗？"], ["陈家祠门票多少钱？"],
                      ["广州塔的高度是多少"]]


@pytest.mark.fast
def test_grouping_compares_only_what_can_be_similar_and_misses_nothing():
    """Prefix filtering against comparing each new wording with every earlier one, on random wordings."""
    rng = random.Random(3)
    vocabulary = [*"排队 停车 收费 宠物 演出 酒店 行李 寄存 轮椅 租借 充电宝 外币 门票 学生 优惠 开门".split(), *sorted(NAMES)]
    asked = [Asked(f"q{number}", f"2026-12-04T00:{number // 60:02d}:{number % 60:02d}.000Z", "tour_guide", "no_source",
                   set(rng.sample(vocabulary, rng.randint(1, 5)))) for number in range(400)]
    counts = Counter(term for question in asked for term in question.terms)
    weight = {term: math.log(1 + len(asked) / count) for term, count in counts.items()}
    everyone: list[list[Asked]] = []
    for question in asked:
        number = next((index for index, group in enumerate(everyone)
                       if any(_similar(question.terms, other.terms, weight, NAMES) for other in group)), None)
        everyone.append([question]) if number is None else everyone[number].append(question)
    assert grouped(asked, NAMES) == everyone and 20 < len(everyone) < 380


@pytest.mark.fast
def test_an_entry_named_by_its_question_leaves_what_the_question_asked_about():
    """An answer written from the page is an entry named by its question: a question asked after it (here in
    English) must not make the entry's words names for the questions before it, or the group is about nothing and is
    never marked answered."""
    def at(second: int) -> str:
        return f"2026-12-06T00:54:{second:02d}.000Z"

    asked = [Asked("沙面岛上有共享单车吗？", at(35), "tour_guide", "not_covered", search_terms("沙面岛上有共享单车吗？")),
             Asked("Is Shamian quiet at night?", at(48), "tour_guide", "no_source", search_terms("Is Shamian quiet?"))]
    documents = {"沙面": ("沙面", datetime(2026, 11, 1, tzinfo=UTC).timestamp()),
                 "沙面岛上有共享单车吗": ("沙面岛上有共享单车吗", datetime(2026, 12, 6, 0, 54, 38, tzinfo=UTC).timestamp())}
    group = next(group for group in unanswered(asked, documents) if group.question.startswith("沙面"))
    assert group.about == ["共享", "单车", "岛上"]


@pytest.mark.fast
def test_an_entry_written_in_the_second_its_question_was_asked_answers_it(tmp_path):
    """The operator can write the answer within the second the question was asked (the app's own "not in the guide"
    reply is instant): the entry is newer than the question to the microsecond, not to the second."""
    question = "荔湾湖公园的游船几点停止售票？"
    entry = tmp_path / "荔湾湖公园的游船几点停止售票.md"
    entry.write_text("# 荔湾湖公园的游船几点停止售票\n\n游船每天下午五点停止售票。\n", encoding="utf-8")
    written = datetime(2026, 12, 7, 5, 39, 57, 900_000, tzinfo=UTC).timestamp()
    os.utime(entry, (written, written))
    asked = [Asked(question, "2026-12-07T05:39:57.512345Z", "tour_guide", "not_covered", search_terms(question))]
    groups = unanswered(asked, {entry.stem: (entry.stem, written)})
    assert groups[0].about == sorted(search_terms(question))
    mark_answered(groups, lambda text, persona: [Found(str(entry), entry.stem, "", "游船每天下午五点停止售票。", 1.0)])
    assert groups[0].answered_by == entry.stem


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    running = operators_site(tmp_path_factory.mktemp("operator-state"), "app-operator.log",
                             CHAT_OPERATOR_TOKEN="operator-secret-token-of-32-chars", CHAT_DAILY_TOKENS_PER_USER="100000")
    yield running
    running.stop()


ROUTES = ["/operator", "/operator?days=30", "/operator/unanswered.csv", "/operator/unanswered.json",
          "/operator/usage.csv", "/operator/documents.json", "/operator/users.csv"]


def test_only_operators_reach_any_operator_route(site):
    bob, alice = login_headers(site.url, "bob"), login_headers(site.url, "alice")
    for number, route in enumerate(ROUTES):
        assert httpx.get(site.url + route, timeout=30).status_code == 403, route
        assert httpx.get(site.url + route, headers=bob, timeout=30).status_code == 403, route
        # Each wrong token from an address of its own: five from one address and it meets 429 (test_lan_neighbours).
        with httpx.Client(transport=httpx.HTTPTransport(local_address=f"127.0.0.{20 + number}"), timeout=30) as guesser:
            assert guesser.get(site.url + route, headers={"Authorization": "Bearer wrong"}).status_code == 403
        assert httpx.get(site.url + route, headers=alice, timeout=30).status_code == 200, route
    token = {"Authorization": "Bearer operator-secret-token-of-32-chars"}
    assert httpx.get(f"{site.url}/operator/usage.json", headers=token, timeout=30).status_code == 200
    opened = httpx.get(f"{site.url}/operator?token=operator-secret-token-of-32-chars", timeout=30)
    assert opened.status_code == 303 and opened.headers["location"] == "/operator"
    assert "operator_token=operator-secret-token-of-32-chars" in opened.headers["set-cookie"]
    assert "HttpOnly" in opened.headers["set-cookie"] and "Path=/operator" in opened.headers["set-cookie"]


async def ask_thirty(site) -> None:
    """A visitor's 30 questions, 8 of them not covered by the guide; a thumbs down on three covered ones."""
    bob = await visit(site.url, login_headers(site.url, "bob"))
    for question in [*UNCOVERED, *(f"[quote] {question}" for question in COVERED)]:
        await bob.ask_and_wait(question)
    replies = [data["id"] for event, data in bob.events if event == "stream_start"]
    session = bob.socket.connection_auth["sessionId"]
    for reply in replies[-3:]:
        given = httpx.put(f"{site.url}/feedback", json={"feedback": {"forId": reply, "value": 0}, "sessionId": session},
                          headers=login_headers(site.url, "bob"), timeout=30)
        assert given.status_code == 200, given.text
    await bob.socket.disconnect()
    await asyncio.sleep(1)  # the store's last writes


def test_the_unanswered_grouped_on_the_page_and_in_the_csv_and_a_new_document_answers_one(site, browser):
    with ThreadPoolExecutor(1) as pool:  # the socket client's event loop, beside Playwright's
        pool.submit(asyncio.run, ask_thirty(site)).result()

    alice = login_headers(site.url, "alice")
    table = list(csv.DictReader(io.StringIO(httpx.get(f"{site.url}/operator/unanswered.csv", headers=alice,
                                                      timeout=30).text)))
    assert (table[0]["asked"], table[0]["question"]) == ("4", "广州塔现在排队要多久？")
    assert [int(row["asked"]) for row in table] == [4, 2, 2, 1, 1, 1]
    assert {row["question"] for row in table[1:3]} == {"陈家祠停车场收费吗？", "珠江夜游的船上wifi密码是多少"}
    assert sum("thumbs_down" in row["reasons"] for row in table) == 3 and not any(row["answered_by"] for row in table)

    page = browser.new_page(locale="zh-CN")
    page.context.add_cookies([{"name": "access_token", "value": alice["Cookie"].split("=", 1)[1], "url": site.url}])
    page.goto(f"{site.url}/operator")
    rows = page.locator("[data-operator-unanswered] tr[data-unanswered]")
    assert rows.count() == len(table)
    assert [rows.nth(index).locator("td").nth(1).inner_text() for index in range(rows.count())] == \
           [row["question"] for row in table]
    assert "导览没能回答的问题" in page.inner_text("body") and page.locator("svg rect").count() >= 24
    page.screenshot(path=str(ARTIFACTS / "operator-page.png"), full_page=True)

    answer = site.state / "documents" / "广州塔排队.md"
    answer.write_text("# 广州塔排队\n\n广州塔观光排队通常需要三十分钟，节假日排队更久。", encoding="utf-8")
    os.utime(answer, (time.time() + 1, time.time() + 1))
    deadline = time.monotonic() + 40  # the knowledge base rescans every 10 s
    while time.monotonic() < deadline:
        page.reload()
        if page.locator("tr[data-answered]").count():
            break
        time.sleep(2)
    assert page.locator("tr[data-answered]").count() == 1, page.locator("tr[data-answered]").all_inner_texts()
    assert "广州塔现在排队要多久" in page.locator("tr[data-answered]").inner_text()
    answered = httpx.get(f"{site.url}/operator/unanswered.csv", headers=alice, timeout=30).text
    assert "广州塔排队" in next(line for line in answered.splitlines() if line.startswith("4,"))
    page.close()


async def limited_chats(url: str) -> None:
    bob = await visit(url, cookie_at(url, "bob"))
    first = await bob.ask_and_wait("第一个问题")  # its prompt alone is past the limit: it is still answered whole
    assert first.rstrip().endswith("w19") and bob.generated_tokens == 20, first  # the whole budget
    await asyncio.sleep(1)  # stored
    await bob.ask("第二个问题")
    await until(lambda: bob.said("今天的额度已用完"), 30)
    refusal = next(message["output"] for message in bob.messages if "额度" in message["output"])
    assert "00:00" in refusal and "50" in refusal and "allowance" in refusal
    alice = await visit(url, cookie_at(url, "alice"))
    assert (await alice.ask_and_wait("别人的问题")).rstrip().endswith("w19")
    await bob.socket.disconnect()
    await alice.socket.disconnect()


def cookie_at(url: str, name: str) -> dict[str, str]:
    return login_headers(url, name)


def test_a_daily_limit_lets_the_running_reply_finish_and_stops_the_next_question(tmp_path):
    users_file(tmp_path, ("alice", "bob"))
    running = FakeApp(ARTIFACTS / "app-daily-limit.log", CHAT_STATE_DIR=str(tmp_path),
                      CHAT_USERS_FILE=str(tmp_path / "users.json"), CHAT_MAX_NEW_TOKENS="20",
                      CHAT_DAILY_TOKENS_PER_USER="50")
    try:
        running.wait_until_ready(timeout=60)
        with ThreadPoolExecutor(1) as pool:  # the socket clients' event loop, beside Playwright's
            pool.submit(asyncio.run, limited_chats(running.url)).result()
    finally:
        running.stop()
