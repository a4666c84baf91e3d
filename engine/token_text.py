"""What each token of a byte-level BPE tokenizer (Qwen's) stands for, as text a person can read.

A token is a run of bytes. Most are whole characters (a Chinese character, a word with its leading space);
some hold part of a character whose bytes the next token completes: those bytes are shown as such, `\\xe5\\xb9`,
since they are no text on their own, and the token's whole characters as text. Special tokens (`<|im_start|>`) are
shown as they are written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from engine.prompt import RenderedPrompt


@lru_cache(maxsize=1)
def _byte_of() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the printable character that stands for each byte in a BPE token."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    characters = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            characters.append(256 + extra)
            extra += 1
    return {chr(character): byte for byte, character in zip(printable, characters)}


def piece(token: str) -> str:
    """The text of one BPE token string (as `convert_ids_to_tokens` gives it), or its bytes where they are not
    whole characters."""
    byte_of = _byte_of()
    if not all(character in byte_of for character in token):
        return token  # a special or added token, written as itself
    return bytes(byte_of[character] for character in token).decode("utf-8", errors="backslashreplace")


def pieces(tokenizer, token_ids: Sequence[int]) -> list[str]:
    return [piece(token) for token in tokenizer.convert_ids_to_tokens(list(token_ids))]


def split(tokenizer, text: str) -> list[tuple[int, str]]:
    """The tokens `tokenizer` splits `text` into (special tokens written in it count as themselves), with their text."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    return list(zip(ids, pieces(tokenizer, ids)))


def with_pieces(tokenizer, prompt: RenderedPrompt) -> RenderedPrompt:
    """`prompt` with each token's text and its special tokens marked."""
    special = {token for token, added in tokenizer.added_tokens_decoder.items() if added.special}
    return replace(prompt, pieces=tuple(pieces(tokenizer, prompt.token_ids)),
                   special_ids=frozenset(special.intersection(prompt.token_ids)))
