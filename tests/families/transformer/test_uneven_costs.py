"""Costs of uneven first/last pipeline stages: pass times, parameters and memory scale with each stage's layers,
the optimistic bound stays below the simulated step, and the steady-state score equals the full simulation."""

from __future__ import annotations

import pytest

from autoplan.families.transformer.memory import memory_per_stage, peak_memory
from autoplan.families.transformer.passes import pass_costs
from autoplan.families.transformer.step import lower_bound, stage_params
from autoplan.sim.simulate import score, simulate_step
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.validity import violations

EVEN = dict(pp=4, dp=2, global_batch=16, schedule="1f1b")
UNEVEN = EVEN | dict(first_stage_layers=1, last_stage_layers=1)       # 8 layers: 1 + 3 + 3 + 1


def test_pass_times_are_linear_in_the_chunk_layers(tiny_gpt, a100_8):
    even = pass_costs(tiny_gpt, a100_8, Strategy(**EVEN))
    uneven = pass_costs(tiny_gpt, a100_8, Strategy(**UNEVEN))
    for fwd in (True, False):
        # middle stages: 3 layers instead of 2
        assert uneven[(fwd, False, False)].seconds == pytest.approx(1.5 * even[(fwd, False, False)].seconds)
        # the ends: one layer fewer than even, the embedding / output layer unchanged
        for key in ((fwd, True, False), (fwd, False, True)):
            assert uneven[key].seconds == pytest.approx(even[key].seconds - 0.5 * even[(fwd, False, False)].seconds)


def test_parameters_and_memory_scale_with_the_stage_layers(tiny_gpt, a100_8):
    even, uneven = Strategy(**EVEN), Strategy(**UNEVEN)
    per_layer = tiny_gpt.layer_params()
    assert stage_params(tiny_gpt, uneven, 0) == pytest.approx(stage_params(tiny_gpt, even, 0) - per_layer)
    assert stage_params(tiny_gpt, uneven, 1) == pytest.approx(stage_params(tiny_gpt, even, 1) + per_layer)
    mem_even, mem_uneven = memory_per_stage(tiny_gpt, a100_8, even), memory_per_stage(tiny_gpt, a100_8, uneven)
    for stage, ratio in ((0, 0.5), (1, 1.5), (2, 1.5), (3, 0.5)):
        assert mem_uneven[stage].activations == pytest.approx(ratio * mem_even[stage].activations)
    assert peak_memory(tiny_gpt, a100_8, uneven) == max(m.total for m in mem_uneven)


@pytest.mark.parametrize("kw", [UNEVEN, UNEVEN | dict(global_batch=6), EVEN | dict(last_stage_layers=2),
                                dict(pp=2, dp=4, global_batch=24, first_stage_layers=3, last_stage_layers=5),
                                dict(pp=2, dp=2, tp=2, global_batch=8, first_stage_layers=6, schedule="interleaved",
                                     virtual_stages=2)])
def test_uneven_score_equals_the_full_simulation_and_bounds_hold(tiny_gpt, a100_8, kw):
    s = Strategy(**kw)
    assert not violations(tiny_gpt, 8, s)
    full = simulate_step(tiny_gpt, a100_8, s).timeline.makespan
    assert score(tiny_gpt, a100_8, s).step_time == pytest.approx(full, rel=1e-9)
    assert lower_bound(tiny_gpt, a100_8, s) <= full * (1 + 1e-12)


def test_busier_middle_stage_slows_the_step(tiny_gpt, a100_8):
    # 2 + 2 + 2 + 2 against 1 + 3 + 3 + 1: the middle stages set the 1F1B steady state
    assert score(tiny_gpt, a100_8, Strategy(**UNEVEN)).step_time > score(tiny_gpt, a100_8, Strategy(**EVEN)).step_time
