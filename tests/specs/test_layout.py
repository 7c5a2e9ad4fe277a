"""Uneven first/last pipeline stages: Megatron-Core's validity rules, the layers of every stage and chunk, the
balanced layout the search proposes, and the plan's label."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.errors import SpecError
from autoplan.specs.catalog import get_model
from autoplan.specs.layout import balanced_layout, chunk_layers, stage_layers
from autoplan.specs.strategy import Strategy, violations

LLAMA = get_model("llama3-405b")


def _meta(**kw) -> Strategy:
    """Meta's Llama 3 405B plan (arXiv 2407.21783 §3.3): TP8 PP16 DP128, 2048 sequences, 7 + 14·8 + 7 layers."""
    return Strategy(**{"tp": 8, "pp": 16, "dp": 128, "global_batch": 2048, "first_stage_layers": 7,
                       "last_stage_layers": 7} | kw)


def test_meta_layout_is_valid_with_1f1b_and_interleaved():
    assert violations(LLAMA, 16384, _meta()) == []
    assert [stage_layers(126, _meta(), i) for i in range(16)] == [7] + [8] * 14 + [7]
    assert chunk_layers(126, _meta()) == (7, 8, 7)
    # interleaved: 4 layers per middle chunk, the outer chunks give up the missing layer (7 = 3 + 4)
    two = _meta(schedule="interleaved", virtual_stages=2)
    assert violations(LLAMA, 16384, two) == []
    assert chunk_layers(126, two) == (3, 4, 3)
    assert chunk_layers(126, _meta(schedule="interleaved", virtual_stages=4)) == (1, 2, 1)


def test_even_plans_are_unchanged():
    s = Strategy(pp=4, dp=2, global_batch=8)
    assert not s.uneven and chunk_layers(96, s) == (24, 24, 24) and stage_layers(96, s, 3) == 24
    assert "L" not in s.short() and "L7/7" in _meta().short()
    assert violations(LLAMA, 16384, _meta(first_stage_layers=0, last_stage_layers=0)) == [
        "layers 126 are not divisible by pp·virtual_stages = 16·1 (uneven: --first-stage-layers 7 "
        "--last-stage-layers 7)"]
    assert violations(LLAMA, 16384, _meta(pp=32, dp=64, first_stage_layers=0, last_stage_layers=0))[0].endswith(
        "--first-stage-layers 3 --last-stage-layers 3)")


@pytest.mark.parametrize("kw, message", [
    (dict(first_stage_layers=6), "126 − first/last stage layers 6/7 = 113 are not divisible by the 14 middle stages "
                                 "· virtual_stages 1 = 14"),
    (dict(schedule="interleaved", virtual_stages=3), "= 112 are not divisible by the 14 middle stages · "
                                                     "virtual_stages 3 = 42"),
    (dict(schedule="interleaved", virtual_stages=8), "first stage layers 7 leave no layer for its outer chunk: the "
                                                     "other 7 chunks hold 1 each"),
    (dict(first_stage_layers=100, last_stage_layers=100), "do not add up to the 126 layers over pp 16"),
    (dict(pp=1, dp=2048), "need pp > 1"),
])
def test_invalid_uneven_layouts_name_their_numbers(kw, message):
    assert any(message in r for r in violations(LLAMA, 16384, _meta(**kw)))


def test_only_one_end_set_splits_the_rest_over_the_others():
    s = Strategy(pp=4, dp=1, global_batch=4, last_stage_layers=5)     # 5 + 3·7 = 26
    assert [stage_layers(26, s, i) for i in range(4)] == [7, 7, 7, 5]
    assert chunk_layers(26, s) == (7, 7, 5)


def test_two_stages_both_set_need_no_middle():
    s = Strategy(pp=2, dp=1, global_batch=2, first_stage_layers=3, last_stage_layers=4)
    assert violations(replace(get_model("llama3-8b"), layers=7), 2, s) == []
    assert chunk_layers(7, s) == (3, 0, 4)


@pytest.mark.parametrize("layers, pp, want", [
    (126, 16, (7, 7)), (126, 8, (15, 15)), (126, 4, (31, 31)), (126, 64, (1, 1)), (127, 16, (0, 7)),
    (126, 2, (0, 0)), (96, 64, (0, 0)), (36, 8, (0, 0)), (5, 1, (0, 0)),
])
def test_balanced_layout(layers, pp, want):
    assert balanced_layout(layers, pp) == want
    first, last = want
    if first or last:
        s = Strategy(pp=pp, dp=1, global_batch=pp, first_stage_layers=first, last_stage_layers=last)
        assert sum(stage_layers(layers, s, i) for i in range(pp)) == layers


def test_negative_stage_layers_are_rejected():
    with pytest.raises(SpecError, match="first-stage-layers must be a non-negative integer"):
        Strategy(first_stage_layers=-1)
