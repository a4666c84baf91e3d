"""`engine.api`: the statistics of a reply and deltas that arrived together, coalesced."""

import pytest

from engine.api import Finished, ReplyStats, TextDelta, coalesce

pytestmark = pytest.mark.fast


def test_rates_come_from_the_token_times():
    stats = ReplyStats(prompt_tokens=10, generated_tokens=11, started=1.0, first_token_at=1.5, last_token_at=3.5)
    assert stats.time_to_first_token == 0.5 and stats.decode_tokens_per_second == 5.0
    assert ReplyStats(prompt_tokens=10, generated_tokens=1, first_token_at=1.5, last_token_at=1.5
                      ).decode_tokens_per_second is None


def test_deltas_that_arrived_together_become_one_before_the_end():
    first = ReplyStats(prompt_tokens=3, generated_tokens=1)
    second = ReplyStats(prompt_tokens=3, generated_tokens=3)
    end = Finished(ReplyStats(prompt_tokens=3, generated_tokens=3, finish_reason="stop"))
    events = coalesce([TextDelta("广", first, token_ids=(7,)), TextDelta("州塔", second, token_ids=(8, 9)), end])
    assert events == [TextDelta("广州塔", second, token_ids=(7, 8, 9)), end]
    assert coalesce([end]) == [end]
