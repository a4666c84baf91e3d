"""The engine's own view of its load: requests running and waiting, KV-cache usage, and the tokens speculation
proposed and the model accepted.

vLLM's scheduler reports these after every engine step through vLLM's stat-logger interface.
`SchedulerWatch` hands vLLM a logger (`watch.logger` is the factory) and keeps only the latest report as
one immutable snapshot, which readers on any thread take whole. Knows nothing of the UI.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from vllm.config import VllmConfig
from vllm.v1.metrics.loggers import StatLoggerBase
from vllm.v1.metrics.stats import IterationStats, SchedulerStats


@dataclass(frozen=True)
class SchedulerSnapshot:
    running: int = 0
    waiting: int = 0
    kv_cache_usage: float = 0.0  # fraction of the KV cache's blocks in use, 0..1
    at: float = 0.0  # time.perf_counter() of vLLM's report; 0 = no report yet
    proposed: int = 0  # tokens speculation proposed since the engine started (`engine.speculation`)
    accepted: int = 0  # of those, the ones the model's own choice kept


class SchedulerWatch:
    """The latest scheduler report of one engine."""

    def __init__(self) -> None:
        self.latest = SchedulerSnapshot()

    def logger(self, vllm_config: VllmConfig, engine_index: int = 0) -> StatLoggerBase:
        return _Recorder(self)


class _Recorder(StatLoggerBase):
    def __init__(self, watch: SchedulerWatch) -> None:
        self._watch = watch

    def record(self, scheduler_stats: SchedulerStats | None, iteration_stats: IterationStats | None,
               mm_cache_stats: object = None, engine_idx: int = 0) -> None:
        if scheduler_stats is not None:
            before, step = self._watch.latest, scheduler_stats.spec_decoding_stats
            # One assignment of an immutable object: a reader never sees half an update.
            self._watch.latest = SchedulerSnapshot(scheduler_stats.num_running_reqs, scheduler_stats.num_waiting_reqs,
                                                   scheduler_stats.kv_cache_usage, time.perf_counter(),
                                                   before.proposed + (step.num_draft_tokens if step else 0),
                                                   before.accepted + (step.num_accepted_tokens if step else 0))

    def log_engine_initialized(self) -> None:
        pass
