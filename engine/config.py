"""Every setting of the app, read once from the environment into one frozen object.

This is the only module that reads environment variables for the app's own settings. Each setting has a
type, a default, a one-line comment and an environment variable name (`CHAT_` + the field in capitals).
Chainlit loads a `.env` file from the working directory before the app imports this module, so
`.env.example` documents the same names. Nothing here knows about vLLM or Chainlit.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable, Mapping

from engine.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
DATA_ROOT = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
DTYPES = ("auto", "bfloat16", "float32", "float16")
WEIGHTS = ("auto", "int8", "original")


@dataclass(frozen=True)
class Settings:
    model: str = ""  # CHAT_MODEL: model folder, .gguf file or ModelScope id; empty = the bundled demo model
    cache_dir: Path = CACHE_ROOT / "qwen-cpu-chat"  # CHAT_CACHE_DIR: where the demo model and converted GGUFs go
    weights: str = "auto"  # CHAT_WEIGHTS: auto = the demo in int8 on CPUs with VNNI/AMX, yours as given; int8; original
    dtype: str = "auto"  # CHAT_DTYPE: auto = bfloat16 where the CPU has avx512_bf16, else float32
    max_model_len: int = 4096  # CHAT_MAX_MODEL_LEN: context length in tokens (prompt + reply)
    kv_cache_gib: float = 0.0  # CHAT_KV_CACHE_GIB: KV cache allocated up front, GiB; 0 = sized for every chat at full context
    threads: int = 0  # CHAT_THREADS: CPU cores for the engine, bound as 0-(N-1); 0 = all but CHAT_RESERVED_CPUS
    reserved_cpus: int = 0  # CHAT_RESERVED_CPUS: with CHAT_THREADS=0, cores kept free of the engine (vLLM's default: 1)
    batch_tokens: int = 256  # CHAT_BATCH_TOKENS: tokens per engine step (prompt chunks + one per running reply)
    engine_nice: int = 19  # CHAT_ENGINE_NICE: CPU priority of the engine, 0-19; 19 yields most to the web UI
    stream_update_seconds: float = 0.25  # CHAT_STREAM_UPDATE_SECONDS: a streaming reply reaches the page at most this often
    sidebar_update_seconds: float = 1.0  # CHAT_SIDEBAR_UPDATE_SECONDS: the sidebar's refresh while a reply streams
    temperature: float = 0.7  # CHAT_TEMPERATURE: default sampling temperature; 0 = greedy
    top_p: float = 0.8  # CHAT_TOP_P: default nucleus sampling mass
    top_k: int = 20  # CHAT_TOP_K: sample from the k likeliest tokens only; 0 = off (Qwen recommends 20)
    repetition_penalty: float = 1.05  # CHAT_REPETITION_PENALTY: above 1 discourages loops; 1 = off
    max_new_tokens: int = 512  # CHAT_MAX_NEW_TOKENS: reply budget per answer, in tokens
    ignore_eos: bool = False  # CHAT_IGNORE_EOS: for benchmarks only: every reply runs to its budget
    max_concurrent_replies: int = 8  # CHAT_MAX_CONCURRENT_REPLIES: replies generated at once; more wait in line
    min_available_gib: float = 1.0  # CHAT_MIN_AVAILABLE_GIB: below this much free memory no new reply starts; 0 = off
    persona: str = "tour_guide"  # CHAT_PERSONA: default persona, a file name in prompts/ without .toml
    enable_thinking: bool = False  # CHAT_ENABLE_THINKING: template switch for Qwen3-style thinking
    prompts_dir: Path = PROJECT_ROOT / "prompts"  # CHAT_PROMPTS_DIR: folder of persona files
    host: str = "127.0.0.1"  # CHAT_HOST: address to listen on; 0.0.0.0 = every network of the machine (the LAN)
    port: int = 8000  # CHAT_PORT: port to listen on
    state_dir: Path = DATA_ROOT / "qwen-cpu-chat"  # CHAT_STATE_DIR: session secret, users file, database
    users_file: Path | None = None  # CHAT_USERS_FILE: set = logins on, with the users in this file; empty = off
    login_max_failures: int = 5  # CHAT_LOGIN_MAX_FAILURES: wrong passwords (per user or address) before a lockout
    login_lockout_seconds: int = 900  # CHAT_LOGIN_LOCKOUT_SECONDS: how long a lockout lasts
    allowed_origins: tuple[str, ...] = ()  # CHAT_ALLOWED_ORIGINS: comma-separated; empty = the app's own address
    metrics_token: str = ""  # CHAT_METRICS_TOKEN: bearer token for /healthz and /metrics from other machines
    db: Path | None = None  # CHAT_DB: the SQLite file of the conversations; empty = chat.db in CHAT_STATE_DIR
    history_days: int = 0  # CHAT_HISTORY_DAYS: delete conversations idle for longer, at start and daily; 0 = keep all
    engine_urls: tuple[str, ...] = ()  # CHAT_ENGINE_URLS: comma-separated base URLs of vLLM servers (http://host:8000/v1); empty = the engine runs in this process
    engine_api_key: str = ""  # CHAT_ENGINE_API_KEY: the vLLM servers' --api-key, sent as a bearer token

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ConfigError(f"CHAT_DTYPE={self.dtype!r} is not one of {', '.join(DTYPES)}.")
        if self.weights not in WEIGHTS:
            raise ConfigError(f"CHAT_WEIGHTS={self.weights!r} is not one of {', '.join(WEIGHTS)}.")
        if self.max_model_len < 256:
            raise ConfigError(f"CHAT_MAX_MODEL_LEN={self.max_model_len} is too small; use at least 256.")
        if self.kv_cache_gib < 0:
            raise ConfigError(f"CHAT_KV_CACHE_GIB={self.kv_cache_gib} must be 0 (sized automatically) or more.")
        if self.threads < 0:
            raise ConfigError(f"CHAT_THREADS={self.threads} must be 0 (automatic) or a number of cores.")
        if self.reserved_cpus < 0:
            raise ConfigError(f"CHAT_RESERVED_CPUS={self.reserved_cpus} must be 0 or a number of cores.")
        if self.batch_tokens < max(64, self.max_concurrent_replies):
            raise ConfigError(f"CHAT_BATCH_TOKENS={self.batch_tokens} must be at least 64 and at least "
                              f"CHAT_MAX_CONCURRENT_REPLIES={self.max_concurrent_replies}.")
        if not 0 <= self.engine_nice <= 19:
            raise ConfigError(f"CHAT_ENGINE_NICE={self.engine_nice} must be between 0 and 19.")
        if not 0.0 <= self.temperature <= 2.0:
            raise ConfigError(f"CHAT_TEMPERATURE={self.temperature} must be between 0 and 2.")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"CHAT_TOP_P={self.top_p} must be above 0 and at most 1.")
        if self.max_concurrent_replies < 1:
            raise ConfigError(f"CHAT_MAX_CONCURRENT_REPLIES={self.max_concurrent_replies} must be at least 1.")
        if self.min_available_gib < 0:
            raise ConfigError(f"CHAT_MIN_AVAILABLE_GIB={self.min_available_gib} must be 0 (off) or more.")
        if self.top_k < 0:
            raise ConfigError(f"CHAT_TOP_K={self.top_k} must be 0 (off) or a number of tokens.")
        if not 1.0 <= self.repetition_penalty <= 2.0:
            raise ConfigError(f"CHAT_REPETITION_PENALTY={self.repetition_penalty} must be between 1 (off) and 2.")
        if not 0 <= self.stream_update_seconds <= 2 or not 0.1 <= self.sidebar_update_seconds <= 10:
            raise ConfigError("CHAT_STREAM_UPDATE_SECONDS must be between 0 and 2 and CHAT_SIDEBAR_UPDATE_SECONDS "
                              "between 0.1 and 10 (seconds).")
        if not 1 <= self.port <= 65535:
            raise ConfigError(f"CHAT_PORT={self.port} must be between 1 and 65535.")
        if self.history_days < 0:
            raise ConfigError(f"CHAT_HISTORY_DAYS={self.history_days} must be 0 (keep everything) or a number of days.")
        if self.login_max_failures < 1 or self.login_lockout_seconds < 1:
            raise ConfigError("CHAT_LOGIN_MAX_FAILURES and CHAT_LOGIN_LOCKOUT_SECONDS must be at least 1.")
        for origin in self.allowed_origins:
            if not re.fullmatch(r"https?://[^/\s]+", origin):
                raise ConfigError(f"CHAT_ALLOWED_ORIGINS: {origin!r} is not an origin; write it as the browser "
                                  "shows it, scheme and host (and port) only, e.g. http://10.0.0.5:8000.")
        for url in self.engine_urls:
            if not re.fullmatch(r"https?://[^/\s]+(/\S*)?/v1", url):
                raise ConfigError(f"CHAT_ENGINE_URLS: {url!r} is not the base URL of a vLLM server's OpenAI API; "
                                  "write it as http://HOST:PORT/v1.")
        if not 1 <= self.max_new_tokens < self.max_model_len:
            raise ConfigError(
                f"CHAT_MAX_NEW_TOKENS={self.max_new_tokens} must be at least 1 and below "
                f"CHAT_MAX_MODEL_LEN={self.max_model_len}."
            )


    @property
    def database(self) -> Path:
        return self.db or self.state_dir / "chat.db"


def _yes_no(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError


def _path(text: str) -> Path:
    return Path(text.strip()).expanduser()


# How each field's annotation is read from its variable's text; a ValueError means the text is not valid.
_PARSERS: dict[str, Callable[[str], object]] = {
    "str": str.strip,
    "int": lambda text: int(text.strip()),
    "float": lambda text: float(text.strip()),
    "bool": _yes_no,
    "Path": _path,
    "Path | None": lambda text: _path(text) if text.strip() else None,
    "tuple[str, ...]": lambda text: tuple(item.strip().rstrip("/") for item in text.split(",") if item.strip()),
}
_KIND_NAMES = {"bool": "yes/no value (true or false)", "Path | None": "path"}


def load_settings(environ: Mapping[str, str] = os.environ) -> Settings:
    """Read every `CHAT_*` variable once and return the validated, frozen settings."""
    values = {}
    for field in fields(Settings):
        name = "CHAT_" + field.name.upper()
        if name in environ:
            try:
                values[field.name] = _PARSERS[field.type](environ[name])
            except ValueError:
                kind = _KIND_NAMES.get(field.type, field.type)
                raise ConfigError(f"{name}={environ[name]!r} is not a valid {kind}.") from None
    return Settings(**values)
