"""Every setting of the app, read once from the environment into one frozen object.

This is the only module that reads environment variables for the app's own settings, and the only reader
of `.env` (`load_env_file`, for every command; Chainlit loads the same file before it imports the app). Each
setting has a type, a default, what it means (`setting`, from which `config.docs` writes the
settings tables and `.env.example`) and an environment variable name (`CHAT_` + the field in capitals).
Standard library only, so the offline installer can use it before .venv exists; nothing here knows about
vLLM or Chainlit.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from config.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
DATA_ROOT = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
DTYPES = ("auto", "bfloat16", "float32", "float16")
WEIGHTS = ("auto", "int8", "int4", "original")
SPECULATION = ("ngram", "off")
MIN_OPERATOR_TOKEN = 24  # characters: a token guessed over the network must not be short


def setting(default: object, doc: str) -> Any:
    """A field of `Settings`: its default and what it means, in the words the settings tables and `.env.example` show."""
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Settings:
    """Each field is read from `CHAT_` + its name in capitals."""

    model: str = setting("", "model folder, ModelScope id, `.gguf` file, or `demo-0.5b` / `demo-1.5b`; empty = the "
                             "default bundled demo model (docs/models.md)")
    cache_dir: Path = setting(CACHE_ROOT / "qwen-cpu-chat", "where the demo model and converted `.gguf` files and int8 "
                                                           "copies are kept")
    weights: str = setting("auto", "`auto` = the demo model in int8 where the CPU has VNNI or AMX (else as it is), "
                                   "yours as given; `int8` = quantise yours once in the set-up; `int4` = 4-bit, "
                                   "calibrated in the set-up (minutes to hours), where the CPU has AVX-512 VNNI and "
                                   "bf16; `original`")
    dtype: str = setting("auto", "`auto` = bfloat16 where the CPU has `avx512_bf16`/AMX, else float32; or `bfloat16`, "
                                 "`float32`, `float16`")
    max_model_len: int = setting(4096, "context length in tokens (prompt + reply)")
    kv_cache_gib: float = setting(0.0, "KV cache allocated up front, GiB; 0 = just enough for "
                                       "`CHAT_MAX_CONCURRENT_REPLIES` chats of `CHAT_MAX_MODEL_LEN` tokens, computed "
                                       "from the model's configuration")
    threads: int = setting(0, "cores for the engine, bound as `0-(N-1)`; 0 = every core but `CHAT_RESERVED_CPUS` "
                              "(vLLM's NUMA-aware binding)")
    reserved_cpus: int = setting(0, "with `CHAT_THREADS=0`, cores kept free of the engine for the web server (vLLM's "
                                    "own default is 1)")
    batch_tokens: int = setting(256, "tokens the engine computes per step: prompt chunks plus one per running reply")
    speculation: str = setting("ngram", "`ngram` = the engine proposes the next tokens by looking the reply's last "
                                        "ones up in its prompt and checks them in one step (replies are drawn from "
                                        "the model's own distribution either way); `off` = one token per step. On 2 "
                                        "cores one visitor's tour-guide replies ran 1.4× as fast with it, eight chats "
                                        "as fast as without (docs/performance.md)")
    speculative_tokens: int = setting(4, "with `CHAT_SPECULATION=ngram`: tokens proposed at most per step (1–8)")
    speculation_max_chats: int = setting(1, "with `CHAT_SPECULATION=ngram`: proposals are made while at most this many "
                                            "replies generate; with more, every step checks one token per chat (eight "
                                            "chats' checks cost more than they save on a few cores)")
    engine_nice: int = setting(19, "CPU priority of the engine processes (0–19); 19 yields most to the web server "
                                   "and a browser on the same machine")
    stream_update_seconds: float = setting(0.25, "a streaming reply reaches the page at most this often; deltas in "
                                                 "between go as one update")
    sidebar_update_seconds: float = setting(1.0, "how often the sidebar refreshes while a reply streams")
    temperature: float | None = setting(None, "sampling temperature, 0 = greedy; empty = the persona's "
                                              "(`temperature` in its file), else 0.7")
    top_p: float | None = setting(None, "nucleus sampling mass; empty = the persona's (`top_p` in its file), else 0.8")
    top_k: int = setting(20, "sample only from the k likeliest tokens; 0 = off (Qwen recommends 20)")
    repetition_penalty: float = setting(1.05, "above 1 discourages repeating what was said; 1 = off")
    max_new_tokens: int = setting(512, "reply budget in tokens")
    ignore_eos: bool = setting(False, "for benchmarks only: every reply runs to its budget (the benchmark's UI path "
                                      "uses it)")
    max_concurrent_replies: int = setting(8, "replies generated at once; more wait in line and see their place")
    min_available_gib: float = setting(1.0, "below this much available memory no new reply starts (a message says "
                                            "so); 0 = off")
    persona: str = setting("tour_guide", "default persona: a file name in `prompts/` without `.toml`")
    enable_thinking: bool = setting(False, "the chat setting \"Think before answering\" as a chat starts, where the "
                                           "model's template has Qwen3's thinking switch (`enable_thinking`)")
    prompts_dir: Path = setting(PROJECT_ROOT / "prompts", "folder of persona files")
    host: str = setting("127.0.0.1", "address to listen on: this machine only; `0.0.0.0` = every network (the LAN)")
    port: int = setting(8000, "port to listen on")
    state_dir: Path = setting(DATA_ROOT / "qwen-cpu-chat", "the app's state: session secret (`auth_secret`), default "
                                                          "users file, the conversations (`chat.db`); back it up")
    knowledge_dir: Path | None = setting(None, "operators' documents (Markdown, text, HTML, PDF, DOCX) every persona "
                                               "answers from, citing them; indexed at start and kept in step; empty = "
                                               "`knowledge` in `CHAT_STATE_DIR`")
    users_file: Path | None = setting(None, "set = logins on, with the users in this file (`python -m web.accounts`); "
                                            "empty = no logins")
    login_max_failures: int = setting(5, "wrong passwords (per user name or per address, within 15 minutes) that lock "
                                         "logins out")
    login_lockout_seconds: int = setting(900, "how long a lockout lasts")
    allowed_origins: tuple[str, ...] = setting((), "comma-separated origins (`https://museum.example.cn`) whose pages "
                                                   "may open the chat's socket and call it over HTTP besides the app's "
                                                   "own address: a proxy's address, sites that embed the widget "
                                                   "(docs/visitors.md)")
    allowed_hosts: tuple[str, ...] = setting((), "comma-separated names the app answers to besides `localhost`, this "
                                                 "machine's own names and addresses and the hosts of "
                                                 "`CHAT_ALLOWED_ORIGINS`: a public name (`guide.example.cn`; "
                                                 "`*.example.cn` for every subdomain). Requests for any other name are "
                                                 "refused (DNS rebinding)")
    trusted_proxies: tuple[str, ...] = setting(("127.0.0.1", "::1"), "comma-separated addresses (or networks) of "
                                               "reverse proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` are "
                                               "believed, in logins' counts and in logs; anyone else's are ignored")
    metrics_token: str = setting("", "bearer token that opens `/healthz` and `/metrics` to other machines (from this "
                                     "machine they are always open)")
    operator_token: str = setting("", "bearer token that opens the operator's page `/operator` without logins, at "
                                      f"least {MIN_OPERATOR_TOKEN} characters (docs/operators.md); with logins, "
                                      "operators log in (`web.accounts add NAME --operator`)")
    max_upload_mb: int = setting(20, "the largest document an operator may upload on `/operator` (MB); a larger one is "
                                     "refused before it is read")
    daily_tokens_per_user: int | None = setting(None, "with logins: tokens (in and out) a user may spend per day; a "
                                                      "question past it waits for midnight, a running reply always "
                                                      "finishes; empty = no limit")
    db: Path | None = setting(None, "the conversations' SQLite file; empty = `chat.db` in `CHAT_STATE_DIR`")
    history_days: int = setting(0, "delete conversations idle for more than this many days, at start and once a day; "
                                   "0 = keep everything")
    engine_urls: tuple[str, ...] = setting((), "comma-separated base URLs of vLLM servers (`http://10.0.0.5:8000/v1`): "
                                               "the model runs there, not in this process (docs/deployment.md)")
    engine_api_key: str = setting("", "the servers' `--api-key`, sent as a bearer token")

    def __post_init__(self) -> None:
        for wrong, problem in (  # each setting's range, and what to write instead
            (self.dtype not in DTYPES, f"CHAT_DTYPE={self.dtype!r} is not one of {', '.join(DTYPES)}."),
            (self.weights not in WEIGHTS, f"CHAT_WEIGHTS={self.weights!r} is not one of {', '.join(WEIGHTS)}."),
            (self.max_model_len < 256, f"CHAT_MAX_MODEL_LEN={self.max_model_len} is too small; use at least 256."),
            (self.kv_cache_gib < 0, f"CHAT_KV_CACHE_GIB={self.kv_cache_gib} must be 0 (sized automatically) or more."),
            (self.threads < 0, f"CHAT_THREADS={self.threads} must be 0 (automatic) or a number of cores."),
            (self.reserved_cpus < 0, f"CHAT_RESERVED_CPUS={self.reserved_cpus} must be 0 or a number of cores."),
            (self.batch_tokens < max(64, self.max_concurrent_replies),
             f"CHAT_BATCH_TOKENS={self.batch_tokens} must be at least 64 and at least "
             f"CHAT_MAX_CONCURRENT_REPLIES={self.max_concurrent_replies}."),
            (self.speculation not in SPECULATION,
             f"CHAT_SPECULATION={self.speculation!r} is not one of {', '.join(SPECULATION)}."),
            (not 1 <= self.speculative_tokens <= 8, f"CHAT_SPECULATIVE_TOKENS={self.speculative_tokens} must be 1–8."),
            (self.speculation_max_chats < 1,
             f"CHAT_SPECULATION_MAX_CHATS={self.speculation_max_chats} must be at least 1."),
            (not 0 <= self.engine_nice <= 19, f"CHAT_ENGINE_NICE={self.engine_nice} must be between 0 and 19."),
            (self.temperature is not None and not 0.0 <= self.temperature <= 2.0,
             f"CHAT_TEMPERATURE={self.temperature} must be between 0 and 2."),
            (self.top_p is not None and not 0.0 < self.top_p <= 1.0,
             f"CHAT_TOP_P={self.top_p} must be above 0 and at most 1."),
            (self.max_concurrent_replies < 1,
             f"CHAT_MAX_CONCURRENT_REPLIES={self.max_concurrent_replies} must be at least 1."),
            (self.min_available_gib < 0, f"CHAT_MIN_AVAILABLE_GIB={self.min_available_gib} must be 0 (off) or more."),
            (self.top_k < 0, f"CHAT_TOP_K={self.top_k} must be 0 (off) or a number of tokens."),
            (not 1.0 <= self.repetition_penalty <= 2.0,
             f"CHAT_REPETITION_PENALTY={self.repetition_penalty} must be between 1 (off) and 2."),
            (not 0 <= self.stream_update_seconds <= 2 or not 0.1 <= self.sidebar_update_seconds <= 10,
             "CHAT_STREAM_UPDATE_SECONDS must be between 0 and 2 and CHAT_SIDEBAR_UPDATE_SECONDS between 0.1 and 10 "
             "(seconds)."),
            (not 1 <= self.port <= 65535, f"CHAT_PORT={self.port} must be between 1 and 65535."),
            (self.daily_tokens_per_user is not None and self.daily_tokens_per_user < 1,
             f"CHAT_DAILY_TOKENS_PER_USER={self.daily_tokens_per_user} must be empty (no limit) or a number of tokens."),
            (not 1 <= self.max_upload_mb <= 64,
             f"CHAT_MAX_UPLOAD_MB={self.max_upload_mb} must be between 1 and 64 (the knowledge reader's limit)."),
            (self.history_days < 0,
             f"CHAT_HISTORY_DAYS={self.history_days} must be 0 (keep everything) or a number of days."),
            (self.login_max_failures < 1 or self.login_lockout_seconds < 1,
             "CHAT_LOGIN_MAX_FAILURES and CHAT_LOGIN_LOCKOUT_SECONDS must be at least 1."),
            (0 < len(self.operator_token) < MIN_OPERATOR_TOKEN,
             f"CHAT_OPERATOR_TOKEN is {len(self.operator_token)} characters long; use at least {MIN_OPERATOR_TOKEN} "
             "(for example the output of `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)."),
            (not 1 <= self.max_new_tokens < self.max_model_len,
             f"CHAT_MAX_NEW_TOKENS={self.max_new_tokens} must be at least 1 and below "
             f"CHAT_MAX_MODEL_LEN={self.max_model_len}."),
        ):
            if wrong:
                raise ConfigError(problem)
        for origin in self.allowed_origins:
            if not re.fullmatch(r"https?://[^/\s]+", origin):
                raise ConfigError(f"CHAT_ALLOWED_ORIGINS: {origin!r} is not an origin; write it as the browser "
                                  "shows it, scheme and host (and port) only, e.g. http://10.0.0.5:8000.")
        for proxy in self.trusted_proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ConfigError(f"CHAT_TRUSTED_PROXIES: {proxy!r} is not an address or a network (10.0.0.5, "
                                  "10.0.0.0/24).") from None
        for url in self.engine_urls:
            if not re.fullmatch(r"https?://[^/\s]+(/\S*)?/v1", url):
                raise ConfigError(f"CHAT_ENGINE_URLS: {url!r} is not the base URL of a vLLM server's OpenAI API; "
                                  "write it as http://HOST:PORT/v1.")

    def sampling_defaults(self, temperature: float | None = None, top_p: float | None = None) -> tuple[float, float]:
        """A new chat's temperature and top_p: CHAT_TEMPERATURE / CHAT_TOP_P where set, else those given (a persona's),
        else 0.7 and 0.8."""
        return next(value for value in (self.temperature, temperature, 0.7) if value is not None), next(
            value for value in (self.top_p, top_p, 0.8) if value is not None)

    @property
    def database(self) -> Path:
        return self.db or self.state_dir / "chat.db"

    @property
    def knowledge_folder(self) -> Path:
        return self.knowledge_dir or self.state_dir / "knowledge"

    @property
    def kept_documents(self) -> Path:
        """Where documents deleted or replaced from the operator's page are kept for a while (`retrieval.library`)."""
        return self.state_dir / "knowledge-kept"

    @property
    def knowledge_index(self) -> Path:
        return self.state_dir / "knowledge.db"


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
    "float | None": lambda text: float(text.strip()) if text.strip() else None,
    "int | None": lambda text: int(text.strip()) if text.strip() else None,
    "tuple[str, ...]": lambda text: tuple(item.strip().rstrip("/") for item in text.split(",") if item.strip()),
}
_KIND_NAMES = {"bool": "yes/no value (true or false)", "Path | None": "path", "float | None": "float"}


def read_env_file(path: Path) -> dict[str, str]:
    """`KEY=VALUE` lines of a `.env` file (comments, blank lines and `export ` skipped, quotes around a value
    removed); an absent file reads as empty."""
    values = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            key, equals, value = line.strip().partition("=")
            if equals and not key.startswith("#"):
                values[key.strip().removeprefix("export ").strip()] = value.strip().strip("'\"")
    return values


def load_env_file() -> None:
    """Put the values of the `.env` file Chainlit reads (`CHAINLIT_ENV_FILE`, else `.env` in the working folder) into
    the environment, where a variable is not set already: every command then sees the settings the app sees."""
    for key, value in read_env_file(Path(os.getenv("CHAINLIT_ENV_FILE", ".env"))).items():
        os.environ.setdefault(key, value)


def load_settings(environ: Mapping[str, str] = os.environ) -> Settings:
    """Read every `CHAT_*` variable once and return the validated, frozen settings."""
    values = {}
    for item in fields(Settings):
        name = "CHAT_" + item.name.upper()
        if name in environ:
            try:
                values[item.name] = _PARSERS[item.type](environ[name])
            except ValueError:
                kind = _KIND_NAMES.get(item.type, item.type)
                raise ConfigError(f"{name}={environ[name]!r} is not a valid {kind}.") from None
    return Settings(**values)
