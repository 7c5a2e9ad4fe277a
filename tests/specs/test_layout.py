"""Uneven first/last pipeline stages: Megatron-Core's validity rules, the layers of every stage and chunk, the
balanced layout the search proposes, and the plan's label."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoplan.errors import SpecError
from autoplan.families.catalog import get_model
from autoplan.specs.layout import balanced_layout, balanced_v_layout, chunk_layers, stage_layers, uneven_violations
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.validity import violations

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
    (dict(schedule="interleaved", virtual_stages=2, first_stage_layers=3, last_stage_layers=11),
     "first stage layers 3 are fewer than its other 1 chunks hold (4 each)"),
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


def test_two_interleaved_stages_split_as_a_layout_string():
    # Megatron-Bridge's DeepSeek-V3 at PP 2, VP 8 ("Et*4|(t*4|)*14tmL"): 4 layers a chunk, the last chunk 1 beside
    # the MTP block and the loss, so rank 0 holds 32 and rank 1 29
    s = Strategy(pp=2, dp=128, global_batch=4096, ep=32, schedule="interleaved", virtual_stages=8,
                 first_stage_layers=32, last_stage_layers=29)
    assert violations(get_model("deepseek-v3"), 256, s) == []
    assert chunk_layers(61, s) == (4, 4, 1) and [stage_layers(61, s, i) for i in (0, 1)] == [32, 29]
    # the inner chunks hold the mean (rounded); an end too small to hold its inner chunks is named
    assert any("inner chunks hold 4 layers each, more than the 2 layers of one end" in r
               for r in violations(get_model("deepseek-v3"), 256, replace(s, first_stage_layers=2,
                                                                          last_stage_layers=59)))


@given(st.integers(2, 16), st.integers(1, 8), st.integers(0, 7), st.integers(0, 7))
def test_two_interleaved_stages_hold_every_layer_once(v, inner, first_short, last_short):
    first, last = v * inner - min(first_short, inner), v * inner - min(last_short, inner)
    s = Strategy(pp=2, dp=1, global_batch=2 * v, schedule="interleaved", virtual_stages=v,
                 first_stage_layers=first, last_stage_layers=last)
    if uneven_violations(first + last, s):
        return
    head, middle, tail = chunk_layers(first + last, s)
    assert head + (v - 1) * middle == first and tail + (v - 1) * middle == last
    assert min(head, tail) >= 0


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


# ------------------------------------------------------------------------------ V shapes (zbv, dualpipev)

DEEPSEEK = get_model("deepseek-v3")


def _v(pp: int, first_stage_layers: int = 1, schedule: str = "dualpipev", **kw) -> Strategy:
    return Strategy(**{"pp": pp, "dp": 2048 // pp, "ep": 64, "zero": 1, "global_batch": 15360,
                       "schedule": schedule, "first_stage_layers": first_stage_layers} | kw)


@pytest.mark.parametrize("schedule", ["zbv", "dualpipev"])
def test_deepseek_v3_layers_split_into_a_v(schedule):
    # Megatron-Core's DeepSeek-V3 layout Et|(tt|)*30mL: 32 virtual stages, the first with 1 layer, the last none
    s = _v(16, 1, schedule)
    assert violations(DEEPSEEK, 2048, s) == []
    assert chunk_layers(61, s) == (1, 2, 0)
    assert [stage_layers(61, s, i) for i in range(16)] == [1] + [4] * 15
    assert chunk_layers(61, _v(8, 5, schedule)) == (3, 4, 2)          # 3 + 14·4 + 2, rank 0 holding 3 and 2


@pytest.mark.parametrize("kw, message", [
    (dict(first_stage_layers=2), "61 − first stage layers 2 = 59 are not divisible by the 30 chunks of the other "
                                 "15 ranks"),
    (dict(first_stage_layers=3, last_stage_layers=2), "give its layers with first stage layers, not last stage "
                                                      "layers 2"),
    (dict(first_stage_layers=0), "not divisible by pp·virtual_stages = 16·2 (uneven: --first-stage-layers 1)"),
])
def test_invalid_v_layouts_name_their_numbers(kw, message):
    assert any(message in r for r in violations(DEEPSEEK, 2048, _v(16, **kw)))


@given(p=st.integers(2, 32), mid=st.integers(1, 12), first=st.integers(1, 30),
       schedule=st.sampled_from(["zbv", "dualpipev"]))
def test_v_layouts_hold_every_layer_once(p, mid, first, schedule):
    layers = first + 2 * (p - 1) * mid
    s = Strategy(pp=p, dp=1, global_batch=4 * p, schedule=schedule, first_stage_layers=first)
    assert uneven_violations(layers, s) == []
    head, middle, tail = chunk_layers(layers, s)
    assert (middle, head + tail, head - tail) == (mid, first, first % 2)
    assert sum(stage_layers(layers, s, i) for i in range(p)) == layers
    assert head + tail + (2 * p - 2) * middle == layers                 # the V's 2p chunks


@given(layers=st.integers(1, 300), p=st.integers(1, 64), most=st.integers(1, 4))
def test_balanced_v_layout_is_valid_and_lightens_rank_0(layers, p, most):
    first = balanced_v_layout(layers, p, most)
    if first == 0:
        return
    s = Strategy(pp=p, dp=1, global_batch=4 * p, schedule="zbv", first_stage_layers=first)
    assert uneven_violations(layers, s) == []
    others = stage_layers(layers, s, 1)
    assert others - most <= first < others                             # rank 0 gives up 1..most layers


@pytest.mark.parametrize("schedule, chunks", [("1f1b", 1), ("interleaved", 3), ("zbv", 2), ("dualpipev", 2),
                                              ("dualpipe", 2)])
@pytest.mark.parametrize("p", [2, 4, 6])
def test_rank_of_inverts_virtual_stage(schedule, chunks, p):
    from autoplan.specs.layout import rank_of, virtual_stage
    for i in range(p):
        for c in range(chunks):
            assert rank_of(schedule, virtual_stage(schedule, i, c, p), p) == i
