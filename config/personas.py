"""Personas as data: one TOML file per persona in `prompts/`, validated on load.

A persona's name is its file name without `.toml`. Adding a persona is adding a file; unknown or missing
keys are an error that names the file. `[[starters]]` tables (a `label` and the `message` it sends) are
optional: the suggestions an empty chat offers. `knowledge` (optional) lists folders of documents this persona
answers from besides the operators' one, relative to the project folder. `temperature` and `top_p` (optional) are
the persona's default sampling, where CHAT_TEMPERATURE / CHAT_TOP_P do not set one for every persona.
`widget_origins` (optional) lists the web sites (origins, as in CHAT_ALLOWED_ORIGINS) whose embedded widget opens with
this persona: a museum's site gets its own guide. This module knows nothing of the model or the UI.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from config.errors import PersonaError
from config.settings import PROJECT_ROOT


@dataclass(frozen=True)
class Starter:
    label: str
    message: str


@dataclass(frozen=True)
class Persona:
    name: str
    display_name: str
    description: str
    system_prompt: str
    starters: tuple[Starter, ...] = ()
    knowledge: tuple[Path, ...] = ()
    temperature: float | None = None
    top_p: float | None = None
    widget_origins: tuple[str, ...] = ()


_SAMPLING = {"temperature": (0.0, 2.0), "top_p": (0.05, 1.0)}  # optional keys and their ranges
_KEYS = {field.name for field in fields(Persona)} - {"name", "starters", "knowledge", "widget_origins", *_SAMPLING}
ORIGIN = re.compile(r"https?://[^/\s]+")  # scheme and host (and port), as a browser sends it


def _load_persona(path: Path) -> Persona:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise PersonaError(f"{path} is not valid TOML: {error}. Fix the file and restart.") from None
    starters = data.pop("starters", [])
    knowledge = data.pop("knowledge", [])
    widget_origins = data.pop("widget_origins", [])
    sampling = {key: data.pop(key) for key in _SAMPLING if key in data}
    for key, value in sampling.items():
        low, high = _SAMPLING[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise PersonaError(f"{path}: {key} must be a number from {low} to {high}, e.g. {key} = {high / 2:g}.")
    unknown = sorted(set(data) - _KEYS)
    missing = sorted(_KEYS - set(data))
    if unknown or missing:
        raise PersonaError(
            f"{path}: unknown keys {unknown}, missing keys {missing}. "
            f"A persona file has exactly these keys: {sorted(_KEYS)}."
        )
    for key in _KEYS:
        if not isinstance(data[key], str) or not data[key].strip():
            raise PersonaError(f"{path}: {key} must be a non-empty string.")
    if not isinstance(starters, list) or not all(
            isinstance(starter, dict) and set(starter) == {"label", "message"}
            and all(isinstance(value, str) and value.strip() for value in starter.values()) for starter in starters):
        raise PersonaError(f"{path}: each [[starters]] entry needs exactly a non-empty label and message.")
    if not isinstance(knowledge, list) or not all(isinstance(folder, str) and folder.strip() for folder in knowledge):
        raise PersonaError(f'{path}: knowledge must be a list of folder names, e.g. knowledge = ["knowledge"].')
    if not isinstance(widget_origins, list) or not all(isinstance(origin, str) and ORIGIN.fullmatch(origin)
                                                       for origin in widget_origins):
        raise PersonaError(f"{path}: widget_origins must be a list of origins, scheme and host (and port) only, "
                           'e.g. widget_origins = ["https://museum.example.cn"].')
    return Persona(name=path.stem, **{key: data[key].strip() for key in _KEYS},
                   starters=tuple(Starter(starter["label"].strip(), starter["message"].strip()) for starter in starters),
                   knowledge=tuple(PROJECT_ROOT / folder.strip() for folder in knowledge),
                   widget_origins=tuple(widget_origins),
                   **{key: float(value) for key, value in sampling.items()})


def load_personas(folder: Path, default: str) -> list[Persona]:
    """Load every persona in `folder`, the `default` one first, the rest by name."""
    personas = {path.stem: _load_persona(path) for path in sorted(folder.glob("*.toml"))}
    if default not in personas:
        raise PersonaError(
            f"Persona {default!r} (CHAT_PERSONA) has no file {folder / (default + '.toml')}. "
            f"Available: {', '.join(sorted(personas)) or 'none'}."
        )
    return [personas[default]] + [persona for name, persona in personas.items() if name != default]
