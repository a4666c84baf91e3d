"""What `/metrics` reports, in Prometheus' format: the app's own registry of counters and histograms, and
the live gauges read at scrape time.

Counters and histograms are fed by the chat handlers (`record_reply`) and the login gate
(`LOGINS_REFUSED`); gauges (replies running and waiting, KV cache, memory, engine state and restarts, speculation's tokens) are
read from their owners when Prometheus asks, through `LiveReadings`. Nothing is estimated: reply figures
are the engine's own measurements (`ReplyStats`). vLLM's own metrics are not mixed in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from engine.api import ReplyStats, ServerReport

disable_created_metrics()  # no *_created series beside every counter: monitoring needs none of them
REGISTRY = CollectorRegistry()
REPLIES = Counter("chat_replies", "Replies by how they ended: stop (the model finished), length (the reply "
                  "budget ran out), abort (stopped by the visitor or a closed tab), error", ["ended"],
                  registry=REGISTRY)
PROMPT_TOKENS = Counter("chat_prompt_tokens", "Prompt tokens sent to the engine", registry=REGISTRY)
GENERATED_TOKENS = Counter("chat_generated_tokens", "Tokens the engine generated", registry=REGISTRY)
TIME_TO_FIRST_TOKEN = Histogram("chat_time_to_first_token_seconds", "From the request to the reply's first token",
                                buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60), registry=REGISTRY)
DECODE_SPEED = Histogram("chat_decode_tokens_per_second", "Tokens per second of one reply after its first token",
                         buckets=(1, 2, 5, 10, 15, 20, 30, 50, 100, 200), registry=REGISTRY)
LOGINS_REFUSED = Counter("chat_logins_refused", "Logins refused: wrong_password (or unknown user), locked_out, too_large",
                         ["reason"], registry=REGISTRY)
ENDINGS = ("stop", "length", "abort", "error")
for _ending in ENDINGS:
    REPLIES.labels(_ending)  # every series exists from the start, at 0


def record_reply(stats: ReplyStats, failed: bool) -> None:
    """Count one finished reply (also a stopped or failed one) with the engine's own figures."""
    REPLIES.labels("error" if failed else stats.finish_reason or "abort").inc()
    PROMPT_TOKENS.inc(stats.prompt_tokens)
    GENERATED_TOKENS.inc(stats.generated_tokens)
    if stats.time_to_first_token is not None:
        TIME_TO_FIRST_TOKEN.observe(stats.time_to_first_token)
    if stats.decode_tokens_per_second is not None:
        DECODE_SPEED.observe(stats.decode_tokens_per_second)


class LiveReadings(Collector):
    """Gauges read from their owners at each scrape; each reader returns the current value."""

    def __init__(self, running: Callable[[], int], waiting: Callable[[], int], kv_cache_usage: Callable[[], float],
                 app_pss: Callable[[], int], engine_ready: Callable[[], bool], restarts: Callable[[], int],
                 servers: Callable[[], tuple[ServerReport, ...]], speculation: Callable[[], tuple[int, int]]) -> None:
        self._readers = running, waiting, kv_cache_usage, app_pss, engine_ready, restarts, servers, speculation

    def collect(self) -> Iterator[Metric]:
        running, waiting, kv_cache_usage, app_pss, engine_ready, restarts, servers, speculation = self._readers
        yield GaugeMetricFamily("chat_replies_running", "Replies generating now", value=running())
        yield GaugeMetricFamily("chat_replies_waiting", "Replies waiting in the app's line", value=waiting())
        yield GaugeMetricFamily("chat_kv_cache_usage_ratio", "Share of the engine's KV cache in use (0-1)",
                                value=kv_cache_usage())
        yield GaugeMetricFamily("chat_app_memory_pss_bytes", "PSS of the app and its engine processes, at most "
                                "30 s old (as the sidebar shows it)", value=app_pss())
        yield GaugeMetricFamily("chat_engine_ready", "1 when the engine answers, 0 while it loads, restarts or "
                                "stops", value=int(engine_ready()))
        yield CounterMetricFamily("chat_engine_restarts", "Times the engine was rebuilt after its processes died",
                                  value=restarts())
        proposed, accepted = speculation()
        yield CounterMetricFamily("chat_speculative_proposed_tokens", "Tokens speculation proposed (CHAT_SPECULATION) "
                                  "since the engine started", value=proposed)
        yield CounterMetricFamily("chat_speculative_accepted_tokens", "Of the tokens speculation proposed, those the "
                                  "model's own choice kept", value=accepted)
        yield GaugeMetricFamily("chat_speculative_acceptance_ratio", "Tokens accepted per token proposed since the "
                                "engine started (0 before any was proposed)", value=accepted / proposed if proposed else 0)
        yield from _per_server(servers())


def _per_server(servers: tuple[ServerReport, ...]) -> Iterator[Metric]:
    """With CHAT_ENGINE_URLS: one series per vLLM server, labelled with its URL (none in process)."""
    gauges = {
        "ready": ("1 when the vLLM server answers and fits, 0 while it is left out", lambda server: int(server.ready)),
        "in_flight": ("This app's replies on the server now", lambda server: server.in_flight),
        "running": ("Requests running on the server (its own report)", lambda server: server.running),
        "waiting": ("Requests waiting on the server (its own report)", lambda server: server.waiting),
        "kv_cache_usage_ratio": ("Share of the server's KV cache in use (0-1)", lambda server: server.kv_cache_usage),
    }
    for name, (documentation, read) in gauges.items():
        family = GaugeMetricFamily(f"chat_server_{name}", documentation, labels=["url"])
        for server in servers:
            family.add_metric([server.url], read(server))
        yield family


def watch(readings: LiveReadings) -> None:
    REGISTRY.register(readings)
