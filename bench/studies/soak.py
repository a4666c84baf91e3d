"""`python -m bench.studies.soak [--minutes 30] [--visitors 8]`: a day at a scenic area, compressed: does the app's memory
settle?

Starts the real app (`chainlit run app.py`, the demo model unless `--model`; knowledge on, logins on as at a client
site), then `--visitors` visitors each ask the tour guide one question after another, reconnecting as a new chat after
one to four questions (a phone put away, a page reloaded), for `--minutes`. Every `--every` seconds it reads each
process's memory: the web process's (RSS, PSS, USS) and each engine process's (PSS, USS). At the end it stops the app as a
presenter does (Ctrl-C) and looks for processes left behind. Reports replies, failures (no whole reply within
`--timeout`), the samples, and for each process the mean of the middle third of the run against the last third: a
process whose memory settled changes by well under 1 %. `--engine fake` runs the tests' scripted engine instead of
vLLM (for finding what the web process keeps, quickly; its figures are not the app's). Writes
`docs/benchmark/soak.json` (or `--out`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import socketio

from bench.studies.operator_year import ASPECTS, SIGHTS
from bench.workload import DEMO
from config.settings import PROJECT_ROOT
from harness.app_process import AppProcess
from harness.visitor import ChatClient

PASSWORD = "soak-visitor-password"


class Tally:
    def __init__(self) -> None:
        self.replies = 0
        self.chats = 0
        self.failures: list[str] = []


def log_in(url: str, number: int) -> dict[str, str]:
    """Visitor `number`'s login cookie (one login at a time: the app checks a few at once from one address)."""
    login = httpx.post(f"{url}/login", data={"username": f"visitor{number}", "password": PASSWORD}, timeout=60)
    login.raise_for_status()
    return {"Cookie": f"access_token={login.cookies['access_token']}"}


async def visitor(url: str, number: int, headers: dict[str, str], deadline: float, tally: Tally, timeout: float,
                  seed: int) -> None:
    """One visitor: chats of one to four questions about the guide's sights, until the deadline."""
    rng = random.Random(seed * 1000 + number)
    while time.monotonic() < deadline:
        client = ChatClient(url, headers)
        try:
            await client.connect()
            tally.chats += 1
            for _ in range(rng.randint(1, 4)):
                if time.monotonic() >= deadline:
                    break
                question = f"{rng.choice(SIGHTS)}{rng.choice(ASPECTS)}？"
                text = await client.ask_and_wait(question, timeout=timeout)
                if not text:
                    tally.failures.append(f"visitor {number}: an empty reply to {question}")
                tally.replies += 1
        except (TimeoutError, OSError, ConnectionError, socketio.exceptions.SocketIOError) as error:
            tally.failures.append(f"visitor {number}: {type(error).__name__}: {error}"[:200])
        finally:
            if client.socket.connected:
                await client.socket.disconnect()


def memory(app: AppProcess) -> dict[str, dict[str, int]]:
    """Each process of the app, by role: the web process's RSS, PSS and USS, each engine process's PSS and USS (its
    own pages: PSS shares the model file's pages with any other process that maps it, an app run beside it too)."""
    web = psutil.Process(app.process.pid)
    full = web.memory_full_info()
    readings = {"web": {"rss": web.memory_info().rss, "pss": full.pss, "uss": full.uss}}
    for child in web.children(recursive=True):
        try:
            name = next((part for part in child.cmdline() if part.startswith("VLLM::")), child.name())
            full = child.memory_full_info()
            reading = readings.setdefault(name, {"pss": 0, "uss": 0})
            reading["pss"] += full.pss
            reading["uss"] += full.uss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return readings


async def sample(app: AppProcess, tally: Tally, started: float, deadline: float, every: float) -> list[dict]:
    samples = []
    while True:
        reading = await asyncio.to_thread(memory, app)
        samples.append({"minute": round((time.monotonic() - started) / 60, 2), "replies": tally.replies,
                        "memory": reading})
        if time.monotonic() >= deadline:
            return samples
        await asyncio.sleep(min(every, max(0.0, deadline - time.monotonic())))


def thirds(samples: list[dict]) -> dict[str, dict]:
    """For each process and figure: the mean of the middle and of the last third of the samples, and the change."""
    count = len(samples)
    middle, last = samples[count // 3:2 * count // 3], samples[2 * count // 3:]
    found = {}
    for role in samples[-1]["memory"]:
        for figure in samples[-1]["memory"][role]:
            def mean(part: list[dict], role=role, figure=figure) -> float:
                return statistics.mean(entry["memory"].get(role, {}).get(figure, 0) for entry in part)
            before, after = mean(middle), mean(last)
            found[f"{role} {figure}"] = {"middle_mib": round(before / 2**20, 1), "last_mib": round(after / 2**20, 1),
                                         "change_percent": round(100 * (after - before) / before, 2) if before else None}
    return found


async def soak(app: AppProcess, visitors: int, minutes: float, every: float, timeout: float, seed: int) -> dict:
    tally = Tally()
    logins = [await asyncio.to_thread(log_in, app.url, number) for number in range(visitors)]
    started = time.monotonic()
    deadline = started + 60 * minutes
    sampler = asyncio.create_task(sample(app, tally, started, deadline, every))
    await asyncio.gather(*(visitor(app.url, number, headers, deadline, tally, timeout, seed)
                           for number, headers in enumerate(logins)))
    samples = await sampler
    return {"replies": tally.replies, "chats": tally.chats, "failures": tally.failures, "samples": samples,
            "thirds": thirds(samples)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--visitors", type=int, default=8)
    parser.add_argument("--every", type=float, default=30, help="seconds between memory readings")
    parser.add_argument("--model", default=DEMO)
    parser.add_argument("--engine", choices=("vllm", "fake"), default="vllm")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="each reply's budget")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a reply may take before it counts as lost")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--project", type=Path, default=PROJECT_ROOT,
                        help="the checkout to run (another commit's worktree, for its baseline)")
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "benchmark" / "soak.json")
    arguments = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="soak-") as folder:
        state = Path(folder)
        for number in range(arguments.visitors):  # the operator's own command, as at a client site
            subprocess.run([sys.executable, "-m", "web.accounts", "add", f"visitor{number}"], input=f"{PASSWORD}\n",
                           text=True, check=True, capture_output=True, env={**os.environ,
                                                                            "CHAT_USERS_FILE": str(state / "users.json")})
        app = AppProcess(arguments.model, state / "app.log", project=arguments.project,
                         command="chainlit" if arguments.engine == "vllm" else "tests.fake_app",
                         CHAT_STATE_DIR=str(state), CHAT_USERS_FILE=str(state / "users.json"),
                         CHAT_MAX_NEW_TOKENS=str(arguments.max_new_tokens))
        try:
            app.wait_until_ready()
            result = asyncio.run(soak(app, arguments.visitors, arguments.minutes, arguments.every, arguments.timeout,
                                      arguments.seed))
        finally:
            engine = [process.pid for process in app.engine_processes()] if app.process.poll() is None else []
            app.stop()
        time.sleep(2)
        result["left_after_stop"] = [pid for pid in engine if psutil.pid_exists(pid)]
        log = (state / "app.log").read_text(errors="replace")
        result["errors_in_log"] = log.count("Traceback")
        # the first few, with the two lines that logged them, to read after the app's folder is gone
        result["tracebacks"] = [match.group(0) for match in re.finditer(r"(?:.*\n){0,2}Traceback[\s\S]{0,3000}", log)][:5]
    result |= {"project": str(arguments.project), "model": arguments.model, "engine": arguments.engine,
               "visitors": arguments.visitors,
               "minutes": arguments.minutes, "max_new_tokens": arguments.max_new_tokens,
               "date": time.strftime("%Y-%m-%d %H:%M")}
    arguments.out.write_text(json.dumps(result, ensure_ascii=False, indent=1))
    print(f"{result['replies']} replies in {result['chats']} chats, {len(result['failures'])} lost, "
          f"{result['errors_in_log']} tracebacks, {len(result['left_after_stop'])} processes left after stop")
    for name, figures in result["thirds"].items():
        print(f"  {name}: middle third {figures['middle_mib']} MiB, last third {figures['last_mib']} MiB "
              f"({figures['change_percent']:+} %)")
    return 0 if not result["failures"] and not result["left_after_stop"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
