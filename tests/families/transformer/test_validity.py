"""Transformer validity rules that read a plan's layout: a partial recompute is held against a chunk's layers only
where the layout exists."""

from __future__ import annotations

from autoplan.families.catalog import get_model
from autoplan.families.registry import violations
from autoplan.families.strategy import Strategy


def test_a_partial_recompute_on_an_invalid_layout_reports_the_layout_not_a_crash():
    # an uneven V on one rank has no chunk layer count (it once divided by 2·(pp − 1) = 0)
    s = Strategy(dp=64, global_batch=128, schedule="zbv", first_stage_layers=1, recompute="full", recompute_layers=1)
    reasons = violations(get_model("gpt-1.7b"), 64, s)
    assert any("need pp > 1" in r for r in reasons) and not any("recompute_layers" in r for r in reasons)


def test_a_partial_recompute_of_a_whole_chunk_is_refused_on_a_valid_layout():
    s = Strategy(dp=16, pp=4, global_batch=128, recompute="full", recompute_layers=6)
    assert any("every layer of a model chunk (6 at most)" in r for r in violations(get_model("gpt-1.7b"), 64, s))
    assert not violations(get_model("gpt-1.7b"), 64, Strategy(dp=16, pp=4, global_batch=128, recompute="full",
                                                              recompute_layers=5))
