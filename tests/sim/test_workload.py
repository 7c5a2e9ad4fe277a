"""Lowering details with closed forms: synchronous pipeline transfers, the DP gradient reduction's dtype and
unfused gradient accumulation."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoplan.hardware import compute

from autoplan.families.transformer import layer
from autoplan.sim.simulate import evaluate, simulate_step
from autoplan.sim.workload import lower
from autoplan.families.strategy import Strategy

_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _interleaved(**kw) -> Strategy:
    base = dict(tp=2, pp=4, dp=8, micro_batch=1, global_batch=64, schedule="interleaved", virtual_stages=2)
    return Strategy(**{**base, **kw})


def _pp_tasks_on_compute(model, cluster, s: Strategy) -> int:
    low = lower(model, cluster, s)
    compute = set(low.compute_streams)
    return sum(1 for r, k in zip(low.tasks.resource, low.tasks.kind) if k == "pp" and r in compute)


def test_synchronous_p2p_puts_every_send_on_the_senders_compute_stream(tiny_gpt, a100_64):
    s = _interleaved(overlap_p2p_comm=False)
    p, v, m = s.pp, s.chunks, s.micro_batches
    # every pass sends once, except the forwards of the last virtual stage and the backwards of the first
    assert _pp_tasks_on_compute(tiny_gpt, a100_64, s) == 2 * m * (p * v - 1)
    assert _pp_tasks_on_compute(tiny_gpt, a100_64, replace(s, overlap_p2p_comm=True)) == 0


def test_1f1b_transfers_are_synchronous_whatever_the_flag(tiny_gpt, a100_64):
    # Megatron-Core overlaps p2p only in the interleaved schedule (validate_args turns it off otherwise)
    s = Strategy(tp=2, pp=4, dp=8, micro_batch=1, global_batch=64, overlap_p2p_comm=True)
    assert _pp_tasks_on_compute(tiny_gpt, a100_64, s) == 2 * s.micro_batches * (s.pp - 1)


@settings(max_examples=25, **_SETTINGS)
@given(pp=st.sampled_from([2, 4]), m=st.integers(1, 12), tp=st.sampled_from([1, 2]), sp=st.booleans())
def test_synchronous_p2p_is_never_faster_and_its_time_shows_as_pp(tiny_gpt, a100_64, pp, m, tp, sp):
    dp = 64 // (tp * pp)
    s = _interleaved(tp=tp, pp=pp, dp=dp, global_batch=pp * m * dp, sequence_parallel=sp and tp > 1)
    overlapped = evaluate(tiny_gpt, a100_64, s).metrics
    blocking = evaluate(tiny_gpt, a100_64, replace(s, overlap_p2p_comm=False)).metrics
    assert blocking.step_time >= overlapped.step_time * (1 - 1e-12)
    assert blocking.breakdown["pp"] > 0
    assert sum(blocking.breakdown.values()) == pytest.approx(blocking.step_time, rel=1e-9)


def test_synchronous_p2p_costs_nothing_when_transfers_are_free(tiny_gpt, a100_64):
    free = replace(a100_64, tiers=tuple(replace(t, bandwidth=1e30, latency=0.0, half_bandwidth_bytes=0.0)
                                        for t in a100_64.tiers))
    s = _interleaved(tp=1, dp=16)
    a = simulate_step(tiny_gpt, free, s).timeline.makespan
    b = simulate_step(tiny_gpt, free, replace(s, overlap_p2p_comm=False)).timeline.makespan
    assert b == pytest.approx(a, rel=1e-9)


def test_16bit_gradient_reduction_moves_half_the_bytes(tiny_gpt, a100_64):
    s = Strategy(tp=1, pp=1, dp=64, micro_batch=1, global_batch=64, overlap_grad_reduce=False)
    fp32 = evaluate(tiny_gpt, a100_64, s).metrics.breakdown["dp"]
    half = evaluate(tiny_gpt, a100_64, replace(s, grad_reduce_in_fp32=False)).metrics.breakdown["dp"]
    assert 0 < half < fp32


@pytest.mark.parametrize("fp32", [True, False])
def test_unfused_accumulation_adds_one_pass_over_the_gradients_per_micro_batch(tiny_gpt, a100_8, fp32):
    s = Strategy(tp=2, pp=1, dp=1, micro_batch=1, global_batch=6, grad_reduce_in_fp32=fp32)
    fused = simulate_step(tiny_gpt, a100_8, s).timeline.makespan
    unfused = simulate_step(tiny_gpt, a100_8, replace(s, gradient_accumulation_fusion=False)).timeline.makespan
    m = tiny_gpt
    params = (m.layers * m.layer_params() + m.embedding_params() + m.output_params()) / s.tp
    tensors = m.layers * layer.layer_tensors(m) + 2 + 2     # word + position embedding; final norm (tied output)
    per_micro_batch = compute.grad_accumulation(a100_8.gpu, params, 4 if fp32 else 2, tensors).seconds
    assert unfused - fused == pytest.approx(s.micro_batches * per_micro_batch, rel=1e-9)


def test_unfused_accumulation_counts_the_last_stages_tied_embedding_copy(tiny_gpt, a100_64):
    s = Strategy(tp=1, pp=4, dp=16, micro_batch=1, global_batch=64, gradient_accumulation_fusion=False)
    fused = lower(tiny_gpt, a100_64, replace(s, gradient_accumulation_fusion=True)).stage_parts()
    extra = [u["compute"] - f["compute"] for u, f in zip(lower(tiny_gpt, a100_64, s).stage_parts(), fused)]
    assert extra[1] == pytest.approx(extra[2], rel=1e-12) and min(extra) > 0
    copy = tiny_gpt.vocab * tiny_gpt.hidden
    gpu = a100_64.gpu
    assert extra[3] - extra[1] > s.micro_batches * compute.memory_time(gpu, 10 * copy, kernels=0)


@pytest.mark.parametrize("zero", [1, 2])
def test_plans_differing_only_in_where_weights_gather_share_one_graph(tiny_gpt, a100_64, zero):
    # overlapped gather before the first forward, gather after the optimizer, or none: one graph, the absent
    # gathers lasting 0 s, so they move no start or end (checked against the step with none)
    plans = [_interleaved(zero=zero, overlap_param_gather=flag) for flag in (True, False)]
    lowered = [lower(tiny_gpt, a100_64, s) for s in plans]
    assert lowered[0]._graph is lowered[1]._graph
    for s in plans:
        sim = simulate_step(tiny_gpt, a100_64, s)
        tasks = sim.lowered.tasks
        zero_length = [i for i, d in enumerate(tasks.duration) if d == 0.0 and tasks.kind[i] == "dp"]
        assert zero_length
        assert all(sim.timeline.end[i] == sim.timeline.start[i] for i in zero_length)


@given(gather=st.floats(1e-4, 1.0), forward=st.floats(1e-4, 1.0), buckets=st.integers(1, 500))
def test_a_bucketed_gathers_wait_is_its_first_bucket_and_what_later_ones_arrive_late(gather, forward, buckets):
    from autoplan.families.costs import pipelined_gather_lead
    lead = pipelined_gather_lead(gather, forward, buckets)
    g, f = gather / buckets, forward / buckets
    # closed form: bucket j arrives (j + 1)·g after the first is asked for when the gather is the slower, so the
    # forward ends g + (n − 1)·(g − f) late; when the forward is the slower, only the first bucket is waited for
    assert lead == pytest.approx(g + (buckets - 1) * max(0.0, g - f))
    assert g - 1e-12 <= lead <= gather + 1e-12
    assert pipelined_gather_lead(gather, forward, 1) == gather


def test_the_first_forward_waits_for_its_first_buckets_only(a100_64):
    # Megatron-Core's forward pre-hooks (param_and_grad_buffer.finish_param_sync): a pp-1 plan's whole-model gather
    # (4B parameters a GPU: 100 buckets) no longer precedes its first forward; the rest runs beside that forward
    from autoplan.families.catalog import get_model
    s = Strategy(tp=2, pp=1, dp=32, micro_batch=1, global_batch=64, zero=1, overlap_param_gather=True)
    sim = simulate_step(get_model("llama3-8b"), a100_64, s)
    low, tl = sim.lowered, sim.timeline
    gathers = [i for i in range(len(low.tasks.duration)) if low.slot_key(i) in ("param_gather", "param_gather_rest")]
    lead, rest = gathers
    assert 0 < low.tasks.duration[lead] < low.tasks.duration[rest]
    first = min(low.meta)                                        # the first pass task: micro-batch 0's forward
    assert lead in low.tasks.deps[first] and rest not in low.tasks.deps[first]
    assert tl.start[first] == pytest.approx(tl.end[lead])
    assert tl.start[rest] == pytest.approx(tl.end[lead]) and tl.end[rest] > tl.start[first]
