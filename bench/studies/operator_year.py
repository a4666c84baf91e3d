"""`python -m bench.studies.operator_year [--questions 100000]`: the operator's page on a year of a busy site's history, measured.

Writes N generated questions with their replies into a fresh history, spread over the last 365 days (daytime hours,
threads of five turns, 200 logged-in users, three personas' worth of questions): most drew on a passage of the guide
(named as the reply's sources, with the figures the app stores), 15 % did not (40 uncovered questions in five
wordings each, and a long tail of 140 more asked seldom), 3 % got a thumbs down. Then it starts the real app on that
history (the demo model) and measures, through HTTP as an operator's browser asks:
- the page for 7, 30 and 365 days, alone (the first of 5 loads and their median);
- 4 chats streaming at once, alone (the baseline), then while the year's page is loaded once a second (an operator
  clicking through it), then while it is loaded back to back (a script hammering it): the chats' tokens per second
  in all and their longest pause between two tokens, and the page's load times meanwhile.
Writes `docs/benchmark/operator.json` (or `--out`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from bench.workload import DEMO
from config.settings import PROJECT_ROOT
from harness.app_process import AppProcess
from harness.questions import questions
from harness.visitor import ChatClient
from history.conversation import APPENDED, REPLY, SOURCES, UNCHECKED
from history.schema import open_database

TOKEN = "bench-operator-token-of-32-characters"
SIGHTS = ["广州塔", "陈家祠", "沙面", "白云山", "越秀公园", "北京路步行街", "永庆坊", "中山纪念堂", "六榕寺", "珠江夜游",
          "南越王博物院", "广东省博物馆", "海珠湿地", "华南植物园", "沙湾古镇", "余荫山房", "上下九步行街", "广州动物园"]
ASPECTS = ["在哪里", "怎么去", "门票多少钱", "开放时间是几点", "有什么好看的", "历史是什么", "适合带孩子去吗", "要玩多久"]
UNCOVERED = ["排队要多久", "停车场收费吗", "有没有WiFi", "可以带宠物吗", "有没有充电宝租借", "附近有什么酒店", "能不能寄存行李",
             "今晚有没有演出", "有没有轮椅租借", "可以用外币吗"]
WORDINGS = ["{sight}{aspect}？", "请问{sight}{aspect}", "{sight}现在{aspect}？", "想问一下{sight}{aspect}", "{sight}今天{aspect}"]
PERSONAS = ["tour_guide", "tour_guide", "tour_guide", "assistant"]


def generate(database: Path, count: int, seed: int = 7) -> dict:
    """`count` questions and their replies over the last 365 days; returns what was written."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    uncovered_topics = [(sight, aspect) for sight in SIGHTS[:4] for aspect in UNCOVERED][:40]
    threads, steps, feedbacks = [], [], []
    unanswered = 0
    for number in range(0, count, 5):
        thread, user = str(uuid.uuid4()), f"user{rng.randrange(200)}"
        start = now - timedelta(days=rng.random() * 365)
        start = start.replace(hour=rng.choice(range(1, 13)))  # 09:00 to 20:00 in China, in UTC
        threads.append((thread, _time(start), user, json.dumps({"chat_profile": rng.choice(PERSONAS)})))
        for turn in range(min(5, count - number)):
            at = start + timedelta(minutes=2 * turn)
            roll = rng.random()
            if roll < 0.15:
                unanswered += 1
                if roll < 0.12:
                    sight, aspect = rng.choice(uncovered_topics)
                    wording = rng.choice(WORDINGS)
                else:  # the long tail: the same kinds of question about the other sights, each seldom
                    sight, aspect, wording = rng.choice(SIGHTS[4:]), rng.choice(UNCOVERED), rng.choice(WORDINGS)
                question, reply = wording.format(sight=sight, aspect=aspect), {APPENDED: len(UNCHECKED)}
                answer = "这个我不太确定。" + UNCHECKED
            else:
                sight, aspect = rng.choice(SIGHTS), rng.choice(ASPECTS)
                question, answer = f"{sight}{aspect}？", f"{sight}的介绍……"
                reply = {SOURCES: [{"label": f"{sight} · 简介", "title": sight, "text": "……"}], APPENDED: 12}
            reply |= {"generated_tokens": rng.randrange(40, 300), "tokens_per_s": 20.0, "ttft_s": round(rng.random(), 2),
                      "prompt_tokens": rng.randrange(600, 1800), "finish": "abort" if rng.random() < 0.02 else "stop",
                      "reply_s": round(2 + 10 * rng.random(), 2), "model": DEMO}
            reply_id = str(uuid.uuid4())
            steps += [(str(uuid.uuid4()), "user", "user_message", thread, _time(at), "{}", question),
                      (reply_id, "guide", "assistant_message", thread, _time(at + timedelta(seconds=5)),
                       json.dumps({REPLY: reply}, ensure_ascii=False), answer)]
            if rng.random() < 0.03:
                feedbacks.append((str(uuid.uuid4()), reply_id, thread, 0))
    with sqlite3.connect(database) as connection:
        connection.executemany('INSERT INTO threads ("id", "createdAt", "userIdentifier", "metadata") '
                               'VALUES (?, ?, ?, ?)', threads)
        connection.executemany('INSERT INTO steps ("id", "name", "type", "threadId", "createdAt", "metadata", "output", '
                               '"streaming") VALUES (?, ?, ?, ?, ?, ?, ?, 0)', steps)
        connection.executemany('INSERT INTO feedbacks ("id", "forId", "threadId", "value") VALUES (?, ?, ?, ?)',
                               feedbacks)
    connection.close()
    return {"questions": count, "threads": len(threads), "unanswered": unanswered, "thumbs_down": len(feedbacks)}


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def load(url: str, days: int) -> float:
    started = time.perf_counter()
    answer = httpx.get(f"{url}/operator?days={days}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
    answer.raise_for_status()
    return time.perf_counter() - started


async def four_chats(url: str, tag: str) -> dict:
    """Four chats asking at once; their tokens per second in all and their longest pause between two tokens."""
    clients = [ChatClient(url) for _ in range(4)]
    await asyncio.gather(*(client.connect() for client in clients))
    started = time.perf_counter()
    await asyncio.gather(*(client.ask(question) for client, question in zip(clients, questions(tag, 4))))
    await asyncio.wait_for(asyncio.gather(*(client.done.wait() for client in clients)), 600)
    await asyncio.gather(*(client.socket.disconnect() for client in clients))
    gaps = [later - earlier for client in clients for earlier, later in zip(client.token_times, client.token_times[1:])]
    return {"tokens_per_s": round(sum(client.generated_tokens for client in clients)
                                  / (max(client.token_times[-1] for client in clients) - started), 2),
            "longest_pause_s": round(max(gaps), 3)}


def measure(url: str) -> dict:
    result = {}
    for days in (7, 30, 365):
        loads = [load(url, days) for _ in range(5)]
        result[f"page_{days}_days_s"] = {"first": round(loads[0], 3), "median": round(statistics.median(loads), 3)}
    result["chats_alone"] = asyncio.run(four_chats(url, "operator-alone"))
    for name, pause in (("every_second", 1.0), ("back_to_back", 0.0)):
        result[f"page_loaded_{name}"] = while_loading(url, pause, f"operator-{name}")
        result[f"page_loaded_{name}"]["chats_tokens_per_s_ratio"] = round(
            result[f"page_loaded_{name}"]["chats"]["tokens_per_s"] / result["chats_alone"]["tokens_per_s"], 2)
    return result


def while_loading(url: str, pause: float, tag: str) -> dict:
    """4 chats while the year's page is loaded again `pause` seconds after each load: the chats' figures and the
    page's load times."""
    loads: list[float] = []
    done = threading.Event()

    def keep_loading() -> None:
        while not done.is_set():
            loads.append(load(url, 365))
            done.wait(pause)

    loader = threading.Thread(target=keep_loading)
    loader.start()
    try:
        chats = asyncio.run(four_chats(url, tag))
    finally:
        done.set()
        loader.join()
    return {"chats": chats, "page_365_days_s": {"median": round(statistics.median(loads), 3),
                                                "max": round(max(loads), 3), "loads": len(loads)}}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.operator_year", description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100_000)
    parser.add_argument("--model", default=DEMO)
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "benchmark" / "operator.json")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        state = Path(scratch) / "state"
        state.mkdir()
        open_database(state / "chat.db")
        result = {"history": generate(state / "chat.db", arguments.questions), "model": arguments.model}
        with AppProcess(arguments.model, Path(scratch) / "app.log", CHAT_STATE_DIR=str(state),
                        CHAT_OPERATOR_TOKEN=TOKEN, CHAT_MAX_NEW_TOKENS="128", CHAT_IGNORE_EOS="true") as app:
            app.wait_until_ready()
            result |= measure(app.url)
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
