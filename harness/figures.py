"""A run's figures: each reply's times and token count, summarised into rates and first-token percentiles.

Times are seconds from the run's common arrival (every chat asks at once), taken where the replies' tokens
arrive; the machines are shared and noisy, so repeated runs are kept and the median one reported.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Reply:
    """One chat's reply: seconds from the common arrival to its first and last token, and its token count."""

    first_token: float
    last_token: float
    tokens: int

    @property
    def decode_rate(self) -> float:
        return (self.tokens - 1) / (self.last_token - self.first_token)


def summarise(replies: list[Reply]) -> dict:
    """Aggregate and per-user decode rates and first-token percentiles of one run of N chats."""
    first = sorted(reply.first_token for reply in replies)
    return {
        "users": len(replies),
        "aggregate_tokens_per_s": sum(reply.tokens for reply in replies) / max(reply.last_token for reply in replies),
        "per_user_tokens_per_s": statistics.fmean(reply.decode_rate for reply in replies),
        "ttft_p50_s": statistics.median(first),
        "ttft_p95_s": _percentile(first, 0.95),
        "replies": [asdict(reply) for reply in replies],
    }


def median_run(runs: list[dict]) -> dict:
    """Of repeated runs of one N, the one with the median aggregate rate; the others' rates are kept beside it.
    The machines are shared and noisy: one run of a few seconds can land on a busy moment."""
    ordered = sorted(runs, key=lambda run: run["aggregate_tokens_per_s"])
    return {**ordered[len(ordered) // 2], "repeats_aggregate_tokens_per_s": [run["aggregate_tokens_per_s"]
                                                                          for run in runs]}


def _percentile(ordered: list[float], fraction: float) -> float:
    """Linear interpolation between closest ranks, as numpy's default."""
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
