"""The step bounds from task durations (sim/bounds.py): never above the simulated step, for every schedule, DP
option, p2p mode and oversubscription; tight where the pipeline fill and drain or ZeRO-2's DP stream set the step,
and where ZeRO-2's reduce-scatters pile up after the last backwards."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from autoplan.families.catalog import get_model
from autoplan.families.registry import lower_bound
from autoplan.families.strategy import Strategy
from autoplan.sim import simulate
from autoplan.sim.bounds import release_bound, step_bound
from autoplan.sim.program import program
from autoplan.sim.workload import slot_costs
from autoplan.specs.cluster import load_cluster
from tests.sim.test_flows import pipeline_plans, valid_case

_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

@settings(max_examples=400, **_SETTINGS)
@given(pipeline_plans(uneven=True))
def test_bound_is_never_above_the_simulated_step(tiny_gpt, a100_64, plan):
    s, cluster = valid_case(tiny_gpt, a100_64, plan)
    bound = step_bound(tiny_gpt, cluster, s)
    assert bound <= simulate._totals(tiny_gpt, cluster, s)[0]
    assert bound <= simulate.score(tiny_gpt, cluster, s).step_time
    assert bound > 0.0
    released = release_bound(tiny_gpt, cluster, s)
    assert released <= simulate.score(tiny_gpt, cluster, s).step_time
    assert released == 0.0 or s.zero >= 2


def _gpt3():
    return get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)


def _zero2_interleaved(pp: int, micro_batch: int):
    """GPT-3 on 1024 H100s, tp 4, 12 chunks a stage, ZeRO-2: the model, cluster, plan and its simulated step."""
    model, cluster = _gpt3()
    s = Strategy(tp=4, pp=pp, dp=256 // pp, micro_batch=micro_batch, global_batch=1536, schedule="interleaved",
                 virtual_stages=12, sequence_parallel=True, zero=2)
    return model, cluster, s, simulate.score(model, cluster, s).step_time


def test_a_step_set_by_zero2s_dp_stream_is_bounded_by_that_stream():
    # ZeRO-2 reduce-scatters after each of 144 backwards: the DP stream is the step; the busiest compute stream is
    # about half of it
    model, cluster, s, step = _zero2_interleaved(pp=2, micro_batch=1)
    assert lower_bound(model, cluster, s) < 0.6 * step
    assert 0.97 * step < step_bound(model, cluster, s) <= step


def test_zero2s_reduce_scatters_after_the_last_backwards_bound_a_pipelined_step():
    # 12 micro-batches on 4 stages of 12 chunks: each stage's last backwards release reduce-scatters that the DP
    # stream, busy with the earlier ones, runs after them; the busiest stream's time alone is 9 % short
    model, cluster, s, step = _zero2_interleaved(pp=4, micro_batch=2)
    assert step_bound(model, cluster, s) < 0.93 * step
    assert 0.95 * step < release_bound(model, cluster, s) <= step


def test_a_1f1b_step_is_bounded_by_its_fill_and_drain():
    # 1F1B on 16 stages, 48 micro-batches: (m + p − 1)(f + b) holds the bubble the busiest stream leaves out
    model, cluster = _gpt3()
    s = Strategy(tp=4, pp=16, dp=16, micro_batch=1, global_batch=768, schedule="1f1b", sequence_parallel=True,
                 zero=1)
    step = simulate.score(model, cluster, s).step_time
    assert lower_bound(model, cluster, s) < 0.8 * step
    assert 0.97 * step < step_bound(model, cluster, s) <= step


def test_zero2_reduce_scatters_after_every_backward_the_last_of_each_chunk_too():
    # Rajbhandari et al. 2020 §5.2; the last backward of a chunk ran in bucket pieces with no reduction before
    model, cluster = _gpt3()
    s = Strategy(tp=4, pp=2, dp=128, micro_batch=1, global_batch=1536, schedule="interleaved", virtual_stages=12,
                 sequence_parallel=True, zero=2, overlap_grad_reduce=True)
    shape, _ = slot_costs(model, cluster, s)
    prog = program(shape)
    dp_stream = {prog.keys[k]: n for k, n in prog.counts[0][3]}
    assert shape.segments == 0
    assert dp_stream["shard_reduce"] == s.micro_batches * s.chunks
