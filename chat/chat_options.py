"""The chat settings (⚙) a visitor can change: the widgets with their limits, and the check of what comes back.

Chainlit's sliders stay within their limits, but the values come back over the socket from the browser, so
they are checked again here: a value out of range, or not a number, is refused with a message saying
what was kept, and nothing unchecked reaches the engine. Changes apply from the next reply on; the
history is untouched.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import chainlit as cl

from config.personas import Persona
from config.settings import Settings
from engine.api import Sampling
from engine.distribution import ALTERNATIVES
from retrieval.grounding import ECHOES


@dataclass(frozen=True)
class Limit:
    label: str
    low: float
    high: float
    step: float


def limits(settings: Settings) -> dict[str, Limit]:
    return {
        "temperature": Limit("温度 Temperature（0 = 每次相同 always the same answer）", 0.0, 2.0, 0.05),
        "top_p": Limit("Top-p（候选词概率累计 nucleus mass）", 0.05, 1.0, 0.05),
        "max_new_tokens": Limit("回答最长 tokens  Max new tokens", 16,
                                max(settings.max_new_tokens, settings.max_model_len // 2), 16),
        **COMPARED,
    }


# The second sampling of the Compare switch, shown after the switches.
COMPARED = {
    "compare_temperature": Limit("对比：第二个回答的温度 Compare: the second reply's temperature", 0.0, 2.0, 0.05),
    "compare_seed": Limit("对比：第二个回答的随机种子（0 = 每次不同）Compare: the second reply's seed (0 = a new draw "
                          "each time; another number makes it repeatable)", 0, 1000, 1),
}
INTEGERS = ("max_new_tokens", "compare_seed")

SWITCHES = {
    "live_stats": "实时统计（侧栏）Live statistics (sidebar)",
    "teaching": "教学视图：显示完整提示词和每个词元的概率 Teaching view: the exact prompt, and each token's probability",
    "knowledge": "资料库：先查资料再回答，并注明来源 Knowledge base: answer from the documents, naming them",
    "thinking": "先思考再回答 Think before answering (the thinking shows in a step above the answer)",
    "compare": "对比 Compare：每个问题两个回答同时生成，第二个按下面的温度和种子 Compare: two replies to each question at "
               "once, the second sampled as set below",
}


@dataclass(frozen=True)
class ChatOptions:
    """One chat's settings, as checked (`checked`); stored with its conversation as a dict (`asdict`)."""

    temperature: float
    top_p: float
    max_new_tokens: int
    live_stats: bool = True  # the switches (`SWITCHES`)
    teaching: bool = False
    knowledge: bool = True
    thinking: bool = False
    compare: bool = False
    compare_temperature: float = 1.2  # Compare's second sampling (`COMPARED`)
    compare_seed: int = 0


def initial_options(settings: Settings, persona: Persona | None = None) -> ChatOptions:
    """A new chat's options: the persona's sampling where the settings leave it to the persona."""
    temperature, top_p = settings.sampling_defaults(*((persona.temperature, persona.top_p) if persona else ()))
    return ChatOptions(temperature, top_p, settings.max_new_tokens, thinking=settings.enable_thinking)


def widgets(settings: Settings, options: ChatOptions, thinking_switch: bool, compare: bool = True) -> list:
    """The settings dialog; the thinking switch only where the model's chat template has one, Compare where
    `compare` (the in-process engine)."""
    sliders = {key: cl.input_widget.Slider(id=key, label=limit.label, initial=getattr(options, key), min=limit.low,
                                           max=limit.high, step=limit.step) for key, limit in limits(settings).items()}
    offered = {"thinking": thinking_switch, "compare": compare}
    return ([slider for key, slider in sliders.items() if key not in COMPARED]
            + [cl.input_widget.Switch(id=key, label=label, initial=getattr(options, key))
               for key, label in SWITCHES.items() if offered.get(key, True)]
            + ([sliders[key] for key in COMPARED] if compare else []))


def checked(settings: Settings, previous: ChatOptions, proposed: dict) -> tuple[ChatOptions, list[str]]:
    """The options to use from now on, and one message per refused value (the previous value stays)."""
    options = asdict(previous)
    refused = []
    for key, limit in limits(settings).items():
        value = proposed.get(key, options[key])
        try:  # a number, as the slider sends it: not a text, not a switch's true/false
            number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")
        except OverflowError:  # an integer too large for a float
            number = float("nan")
        if limit.low <= number <= limit.high:
            options[key] = int(number) if key in INTEGERS else number
        else:
            refused.append(f"{limit.label}: {_shown(value)} 不在 {limit.low:g}–{limit.high:g} 之内，仍为 {getattr(previous, key):g}。 "
                           f"{_shown(value)} is outside {limit.low:g}–{limit.high:g}; {getattr(previous, key):g} is kept.")
    for key, label in SWITCHES.items():
        value = proposed.get(key, options[key])
        if isinstance(value, bool):
            options[key] = value
        else:
            refused.append(f"{label}: {_shown(value)} 不是开或关，仍为{'开' if getattr(previous, key) else '关'}。 "
                           f"{_shown(value)} is not on or off; it stays {'on' if getattr(previous, key) else 'off'}.")
    return ChatOptions(**options), refused


def _shown(value: object) -> str:
    """A refused value as the message quotes it: short, whatever was sent."""
    try:
        text = repr(value)
    except ValueError:  # an integer of more digits than Python writes out
        return "<a huge number>"
    return text if len(text) <= 40 else text[:37] + "..."


def sampling(settings: Settings, options: ChatOptions) -> Sampling:
    """A reply's sampling: the chat's options, the server's settings, and the end of a reply that starts writing
    out its prompt (`grounding.ECHOES`)."""
    return Sampling(options.temperature, options.top_p, options.max_new_tokens, settings.top_k,
                    settings.repetition_penalty, settings.ignore_eos, options.thinking,
                    logprobs=ALTERNATIVES if options.teaching else 0, stop=ECHOES)


def compared(first: Sampling, options: ChatOptions) -> Sampling:
    """The second reply's sampling with Compare on: the first's, at the compare temperature and seed."""
    return replace(first, temperature=options.compare_temperature, seed=options.compare_seed or None)


def label(sampling: Sampling) -> str:
    """What a compared reply is labelled with: its sampling, and whether it can be had again."""
    if sampling.temperature == 0:
        return "温度 temperature 0：总选最可能的词元，每次相同 always the likeliest token, the same every time"
    if sampling.seed is not None:
        return (f"温度 temperature {sampling.temperature:g} · 种子 seed {sampling.seed}：固定种子，同样的问题得到同样的回答 "
                "a fixed seed: the same question gets the same reply")
    return f"温度 temperature {sampling.temperature:g} · 随机 a new draw each time"
