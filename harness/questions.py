"""The questions tests and benchmarks ask: the tour guide's (Chinese and English, 20 to 60 tokens), each new to
the engine at every run, so that only the persona's system prompt may come from vLLM's prefix cache.
"""

from __future__ import annotations

from config.personas import load_personas
from config.settings import PROJECT_ROOT

QUESTIONS = [
    "我第一次来广州，只有一天时间，请帮我安排一条从早到晚的详细路线，包括交通方式和每个地方大概停留多久。",
    "广州早茶有哪些必点的点心？请逐一介绍它们的做法、口味和适合搭配的茶。",
    "Please plan a relaxed family day in Guangzhou with two young children, with a museum, a park and lunch.",
    "请详细介绍陈家祠的历史、建筑特色和参观时值得注意的细节，再推荐附近可以顺路去的地方。",
    "What should a first-time visitor know about Guangzhou's weather, transport and food? List practical tips.",
    "周末想带父母去广州周边玩两天，他们不喜欢太累，请推荐几个地方并说明每天的安排和理由。",
    "请为第一次来广州的游客写一份详细的美食清单，列出十道菜，每道菜说明味道和在哪里可以吃到。",
    "Write a detailed three-day Guangzhou itinerary for a couple who love history, food and photography.",
]


def question(tag: str, number: int) -> str:
    """The workload's question `number` (repeating after the eighth), opened by `tag` and the number, so that no
    run tagged otherwise asked it: a repeated run measures the model and not vLLM's prefix cache."""
    return f"（第 {tag}-{number} 位游客）{QUESTIONS[number % len(QUESTIONS)]}"


def questions(tag: str, chats: int) -> list[str]:
    """One question per chat (see `question`)."""
    return [question(tag, chat) for chat in range(chats)]


def system_prompt() -> str:
    return load_personas(PROJECT_ROOT / "prompts", "tour_guide")[0].system_prompt
