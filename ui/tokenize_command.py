"""The composer's 分词 Tokenize command (`tokenize`): how the typed text splits into the model's tokens, with their
ids and counts, and its count in the other bundled demo models' tokenizers where those are on this machine.

Nothing is generated and nothing enters the conversation: the handler answers from the tokenizers alone (the
engine's, `ChatEngine.tokens`, and the other demos', `engine.demo_tokenizers`); this module only words the answer. The
tokens are shown in the teaching view's element (`TokenView`), a character split over several tokens as its bytes.
"""

from __future__ import annotations

import chainlit as cl

COMMAND = {"id": "tokenize", "icon": "scissors", "button": True, "persistent": False,
           "description": "分词 Tokenize：显示这段文字如何切分为词元（不回答）· how this text splits into tokens (no reply)"}


def report(text: str, tokens: list[tuple[int, str]], model: str, others: dict[str, int]) -> cl.Message:
    """The answer to the command: the counts, then the tokens in a `TokenView` with their ids shown."""
    count = len(tokens)
    lines = [f"✂️ **分词 Tokenize** · {model}: **{count} 个词元 tokens** · {len(text)} 个字符 characters"
             + (f" · {len(text) / count:.2f} 字符/词元 characters per token" if count else "")]
    for name, other in others.items():
        lines.append(f"- {name}: {other} 个词元 tokens" + (" (相同 the same)" if other == count else
                                                        f" ({other - count:+d})"))
    lines.append("\n仅分词，不生成回答，也不计入对话。 Only split: nothing was generated, and the conversation is "
                 "unchanged.")
    view = cl.CustomElement(name="TokenView", display="inline", props={
        "title": "词元（下标为编号） Tokens, each with its id", "ids": True,
        "tokens": [{"id": token, "text": piece} for token, piece in tokens]})
    return cl.Message(content="\n".join(lines), elements=[view])
