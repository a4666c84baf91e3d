"""`python -m bench.studies.storage_cost [--messages N]`: what storing conversations costs the web server, measured.

Saves N messages (questions and replies of chat-like length, in turns, in threads of 20) through the app's
data layer (`history.store.ChatStore`, Chainlit's SQLAlchemy layer on SQLite) on a fresh database, one
after another as a chat does, and measures the CPU time the event loop's own thread spends per message
(`time.thread_time()`: the time the web server cannot serve anyone else; the SQL itself runs in
aiosqlite's thread) and the wall time per message, then the database's size on disk. Writes
`docs/benchmark/history.json` (or `--out`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path

from chainlit.context import init_http_context
from chainlit.utils import utc_now

from config.settings import PROJECT_ROOT
from history.conversation import REPLY
from history.schema import open_database
from history.store import ChatStore

QUESTION = "广州早茶有哪些必点的点心？请逐一介绍它们的做法和口味。"
ANSWER = ("广州早茶的必点点心有虾饺、烧卖、叉烧包、肠粉和凤爪。虾饺皮薄透亮，里面是整只鲜虾；烧卖以猪肉和虾仁为馅，"
          "顶上点缀蟹籽；叉烧包松软微甜，叉烧馅咸香；肠粉滑嫩，可配虾仁或牛肉；凤爪用豉汁蒸得软糯入味。") * 2
TURNS_PER_THREAD = 10


def message(thread: str, index: int) -> dict:
    kind = "user_message" if index % 2 == 0 else "assistant_message"
    return {"id": str(uuid.uuid4()), "threadId": thread, "type": kind, "name": "User" if index % 2 == 0 else "花城导游",
            "output": QUESTION if index % 2 == 0 else ANSWER, "createdAt": utc_now(), "streaming": False,
            "metadata": {} if index % 2 == 0 else {REPLY: {"generated_tokens": 180, "tokens_per_s": 20.5, "ttft_s": 0.3}}}


async def measure(database: Path, count: int) -> dict:
    init_http_context()
    store = ChatStore(database)
    loop_cpu = wall = 0.0
    thread = ""
    for index in range(count):
        if index % (2 * TURNS_PER_THREAD) == 0:
            thread = str(uuid.uuid4())
            await store.update_thread(thread, name=QUESTION[:20], tags=["tour_guide"], metadata={"options": {}})
        cpu_before, wall_before = time.thread_time(), time.perf_counter()
        await store.create_step(message(thread, index))
        loop_cpu += time.thread_time() - cpu_before
        wall += time.perf_counter() - wall_before
    await store.close()
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {"messages": count, "loop_cpu_ms_per_message": round(1000 * loop_cpu / count, 2),
            "wall_ms_per_message": round(1000 * wall / count, 2), "database_bytes": database.stat().st_size,
            "bytes_per_message": round(database.stat().st_size / count)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.storage_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "benchmark" / "history.json")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        database = Path(folder) / "chat.db"
        open_database(database)
        result = asyncio.run(measure(database, arguments.messages))
    arguments.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
