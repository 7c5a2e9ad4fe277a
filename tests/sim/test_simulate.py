"""Simulating a step end to end: the steady-state extrapolation against the full simulation, metric identities,
monotonicity in network and compute speed, and ``evaluate``'s verdicts on invalid and oversized plans."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autoplan.sim import metrics as met, simulate
from autoplan.sim.metrics import BREAKDOWN_KINDS
from autoplan.sim.simulate import evaluate, score, simulate_step
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import ClusterSpec, load_cluster
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.validity import violations


pytestmark = pytest.mark.usefixtures("extend_short_steps_too")


_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def _plans(draw, layers: int = 8, interleaved: bool = True):
    """A plan of the tiny model (8 layers, 8 heads, seq 256) on 8 or 64 GPUs, almost always valid.

    ``interleaved`` False leaves out the interleaved schedule.
    """
    gpus = draw(st.sampled_from([8, 64]))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4, 8]))
    cp = draw(st.sampled_from([1, 1, 2]))
    assume(gpus % (tp * pp * cp) == 0)
    dp = gpus // (tp * pp * cp)
    interleavable = [v for v in (2, 4) if interleaved and pp > 1 and layers % (pp * v) == 0]
    zero_bubble = (["zb-h1"] if pp > 1 else []) + (["zbv"] if pp > 1 and layers % (2 * pp) == 0 else [])
    schedule = draw(st.sampled_from(["gpipe", "1f1b"] + (["interleaved"] if interleavable else []) + zero_bubble))
    if schedule == "interleaved":
        v = draw(st.sampled_from(interleavable))
        m = pp * draw(st.integers(1, 12))
    else:
        v = 1
        m = draw(st.integers(1, 40))
    mb = draw(st.integers(1, 2))
    zero = draw(st.sampled_from([0, 1, 2, 3] if pp == 1 else [0, 1]))
    s = Strategy(tp=tp, pp=pp, dp=dp, cp=cp, micro_batch=mb, global_batch=m * dp * mb, schedule=schedule,
                 virtual_stages=v, sequence_parallel=tp > 1 and draw(st.booleans()),
                 recompute=draw(st.sampled_from(["none", "selective", "full"])), zero=zero,
                 overlap_grad_reduce=draw(st.booleans()), overlap_param_gather=draw(st.booleans()),
                 overlap_p2p_comm=draw(st.booleans()), grad_reduce_in_fp32=draw(st.booleans()),
                 gradient_accumulation_fusion=draw(st.booleans()))
    return gpus, s


def _cluster(gpus: int, a100_8: ClusterSpec, a100_64: ClusterSpec) -> ClusterSpec:
    return a100_8 if gpus == 8 else a100_64


def _faster_network(cluster: ClusterSpec, factor: float = 2.0) -> ClusterSpec:
    return replace(cluster, tiers=tuple(replace(t, bandwidth=t.bandwidth * factor,
                                                allreduce_busbw=t.allreduce_busbw * factor) for t in cluster.tiers))


def _faster_gpu(cluster: ClusterSpec, factor: float = 2.0) -> ClusterSpec:
    return replace(cluster, gpu=replace(cluster.gpu, peak_flops=cluster.gpu.peak_flops * factor))


# ---------------------------------------------------------------------------------- extrapolation and identities


@settings(max_examples=150, **_SETTINGS)
@given(plan=_plans(), flash=st.booleans())
def test_score_equals_the_full_simulation(tiny_gpt, a100_8, a100_64, plan, flash):
    gpus, s = plan
    cluster = replace(_cluster(gpus, a100_8, a100_64), flash_attention=flash)
    assume(not violations(tiny_gpt, gpus, s))
    full = simulate_step(tiny_gpt, cluster, s)
    assert full.micro_batches == s.micro_batches
    m = score(tiny_gpt, cluster, s)
    # long pipelines are extrapolated from two steady-state runs; the max-plus system is periodic, so exactly
    assert m.step_time == pytest.approx(full.timeline.makespan, rel=1e-9)


@settings(max_examples=60, **_SETTINGS)
@given(plan=_plans())
def test_metric_identities(tiny_gpt, a100_8, a100_64, plan):
    gpus, s = plan
    cluster = _cluster(gpus, a100_8, a100_64)
    assume(not violations(tiny_gpt, gpus, s))
    m = score(tiny_gpt, cluster, s)
    step = m.step_time
    assert step > 0
    assert len(m.stage_breakdown) == s.pp
    for stage in m.stage_breakdown:
        assert set(stage) == set(BREAKDOWN_KINDS)
        assert sum(stage.values()) == pytest.approx(step, rel=1e-6)
    assert sum(m.breakdown.values()) == pytest.approx(step, rel=1e-6)
    assert sum(m.fraction(k) for k in BREAKDOWN_KINDS) == pytest.approx(1.0, rel=1e-6)
    assert 0 <= m.exposed_comm_fraction <= 1 + 1e-9
    assert 0 < m.mfu <= m.hfu <= 1
    if s.recompute == "none":
        assert m.mfu == pytest.approx(m.hfu, rel=1e-12)
    assert m.tokens_per_s == pytest.approx(s.global_batch * tiny_gpt.seq_len / step, rel=1e-12)
    assert m.samples_per_s == pytest.approx(s.global_batch / step, rel=1e-12)
    assert m.model_tflops_per_gpu * 1e12 == pytest.approx(
        tiny_gpt.model_flops_per_iteration(s.global_batch) / step / cluster.gpus, rel=1e-12)
    assert m.peak_memory == pytest.approx(max(x.total for x in m.memory))
    assert m.fits and m.memory_capacity == cluster.gpu.hbm_bytes
    # every stage's compute stream did its useful work inside the step
    for act in m.activity:
        assert act["compute"] <= step * (1 + 1e-9)


def _assert_breakdowns_match(model, cluster, s):
    full = simulate_step(model, cluster, s)
    m = score(model, cluster, s)
    expected = met.stage_breakdowns(full.lowered, full.timeline)
    for got, want in zip(m.stage_breakdown, expected, strict=True):
        for kind in BREAKDOWN_KINDS:
            assert got[kind] == pytest.approx(want[kind], rel=1e-6, abs=1e-9 * m.step_time), kind
        assert min(got.values()) >= -1e-9 * m.step_time


@settings(max_examples=60, **_SETTINGS)
@given(plan=_plans(interleaved=False))
def test_score_breakdown_equals_the_full_simulation(tiny_gpt, a100_8, a100_64, plan):
    # the docstring of score(): time and every breakdown term grow by the same amount per period
    # (the interleaved schedule has its own test below)
    gpus, s = plan
    assume(not violations(tiny_gpt, gpus, s))
    _assert_breakdowns_match(tiny_gpt, _cluster(gpus, a100_8, a100_64), s)


def test_interleaved_score_breakdown_equals_the_full_simulation(tiny_gpt, a100_8):
    for m in (16, 32):
        s = Strategy(pp=4, dp=2, micro_batch=1, global_batch=m * 2, schedule="interleaved", virtual_stages=2,
                     overlap_grad_reduce=False, overlap_param_gather=False)
        assert not violations(tiny_gpt, 8, s)
        _assert_breakdowns_match(tiny_gpt, a100_8, s)


@pytest.mark.parametrize("gpus,s", [
    (64, Strategy(tp=1, pp=8, dp=8, global_batch=8 * 48, schedule="1f1b")),
    (64, Strategy(tp=2, pp=8, dp=4, micro_batch=2, global_batch=4 * 2 * 40, schedule="gpipe", zero=1,
                  overlap_param_gather=False)),
    (64, Strategy(tp=2, pp=4, dp=8, global_batch=8 * 48, schedule="interleaved", virtual_stages=2,
                  sequence_parallel=True, recompute="full", zero=1)),
    (8, Strategy(tp=1, pp=2, dp=4, global_batch=4 * 64, schedule="interleaved", virtual_stages=4,
                 overlap_grad_reduce=False)),
    (8, Strategy(tp=2, pp=4, dp=1, cp=1, global_batch=50, schedule="1f1b", recompute="selective")),
    (64, Strategy(tp=2, pp=2, cp=2, dp=8, global_batch=8 * 33, schedule="1f1b")),
])
def test_long_pipelines_extrapolate_exactly(tiny_gpt, a100_8, a100_64, gpus, s):
    cluster = a100_8 if gpus == 8 else a100_64
    assert not violations(tiny_gpt, gpus, s)
    full = simulate_step(tiny_gpt, cluster, s)
    m = score(tiny_gpt, cluster, s)
    assert m.step_time == pytest.approx(full.timeline.makespan, rel=1e-9)
    for stage in m.stage_breakdown:
        assert sum(stage.values()) == pytest.approx(m.step_time, rel=1e-6)


@pytest.mark.parametrize("s", [
    # found by hypothesis: increments constant from 4 to 32 micro-batches, then 0.9% larger from 40 on
    Strategy(dp=1, tp=1, pp=4, cp=2, micro_batch=1, global_batch=48, schedule="interleaved", virtual_stages=2,
             recompute="full", overlap_grad_reduce=True, overlap_param_gather=True, overlap_p2p_comm=False,
             gradient_accumulation_fusion=False),
    Strategy(dp=2, tp=1, pp=4, micro_batch=1, global_batch=40, schedule="interleaved", virtual_stages=2,
             recompute="none", overlap_grad_reduce=False, overlap_p2p_comm=False),
])
def test_interleaved_synchronous_p2p_is_not_extrapolated_from_its_long_transient(tiny_gpt, a100_8, s):
    assert not violations(tiny_gpt, 8, s)
    full = simulate_step(tiny_gpt, a100_8, s)
    m = score(tiny_gpt, a100_8, s)
    assert m.step_time == pytest.approx(full.timeline.makespan, rel=1e-9)
    expected = met.stage_breakdowns(full.lowered, full.timeline)
    for got, want in zip(m.stage_breakdown, expected, strict=True):
        assert got == pytest.approx(want, rel=1e-9)


def test_1f1b_score_equals_the_full_simulation(tiny_gpt, a100_8):
    mismatches = []
    for pp, dp in ((2, 4), (4, 2), (8, 1)):
        for m in (6, 8, 9, 15, 24):
            for overlap in (False, True):
                s = Strategy(pp=pp, dp=dp, micro_batch=1, global_batch=m * dp, schedule="1f1b",
                             overlap_grad_reduce=overlap)
                assert not violations(tiny_gpt, 8, s)
                full = simulate_step(tiny_gpt, a100_8, s).timeline.makespan
                got = score(tiny_gpt, a100_8, s).step_time
                if got != pytest.approx(full, rel=1e-9):
                    mismatches.append((s.short(), m, got / full - 1))
    assert not mismatches, mismatches


def test_unextrapolated_plan_breakdown_accounts_for_the_whole_step(tiny_gpt, a100_8):
    s = Strategy(tp=2, pp=4, micro_batch=1, global_batch=4, schedule="1f1b")
    sim = simulate_step(tiny_gpt, a100_8, s)
    m = score(tiny_gpt, a100_8, s)
    assert m.step_time == sim.timeline.makespan
    # a 4-stage pipeline with 4 micro-batches idles in its bubble
    assert m.breakdown["bubble"] > 0
    assert m.breakdown["compute"] > 0 and m.breakdown["optimizer"] > 0


# --------------------------------------------------------------------------------------------------- monotonicity


@settings(max_examples=25, **_SETTINGS)
@given(plan=_plans())
def test_doubling_every_network_tier_never_slows_a_step(tiny_gpt, a100_8, a100_64, plan):
    gpus, s = plan
    cluster = _cluster(gpus, a100_8, a100_64)
    assume(not violations(tiny_gpt, gpus, s))
    base = score(tiny_gpt, cluster, s).step_time
    assert score(tiny_gpt, _faster_network(cluster), s).step_time <= base * (1 + 1e-9)


@settings(max_examples=25, **_SETTINGS)
@given(plan=_plans())
def test_doubling_peak_flops_never_slows_a_step(tiny_gpt, a100_8, a100_64, plan):
    gpus, s = plan
    cluster = _cluster(gpus, a100_8, a100_64)
    assume(not violations(tiny_gpt, gpus, s))
    base = score(tiny_gpt, cluster, s).step_time
    assert score(tiny_gpt, _faster_gpu(cluster), s).step_time <= base * (1 + 1e-9)


def test_faster_hardware_on_a_large_plan(a100_64):
    # the same check on a model whose collectives and GEMMs are far from the latency floor
    model = replace(get_model("gpt-1.7b"), layers=8)
    s = Strategy(tp=8, pp=2, dp=4, micro_batch=1, global_batch=32, sequence_parallel=True)
    base = score(model, a100_64, s).step_time
    assert score(model, _faster_network(a100_64), s).step_time < base
    assert score(model, _faster_gpu(a100_64), s).step_time < base


@pytest.mark.parametrize("schedule,pp,v", [("1f1b", 2, 1), ("gpipe", 4, 1), ("interleaved", 2, 2),
                                           ("1f1b", 1, 1)])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_peak_memory_grows_with_micro_batch(tiny_gpt, a100_8, schedule, pp, v, recompute):
    m = 4                                         # fixed number of micro-batches
    dp = 8 // pp
    peaks = []
    for mb in (1, 2, 4):
        s = Strategy(pp=pp, dp=dp, micro_batch=mb, global_batch=m * dp * mb, schedule=schedule,
                     virtual_stages=v, recompute=recompute)
        assert not violations(tiny_gpt, 8, s) and s.micro_batches == m
        peaks.append(score(tiny_gpt, a100_8, s).peak_memory)
    assert peaks[0] < peaks[1] < peaks[2]


# ------------------------------------------------------------------------------------------------------- evaluate


def test_evaluate_reports_violations_without_raising(tiny_gpt, a100_8):
    s = Strategy(tp=3, pp=2, dp=1, global_batch=5)
    ev = evaluate(tiny_gpt, a100_8, s)
    assert not ev.feasible and ev.metrics is None
    assert ev.violations == tuple(violations(tiny_gpt, 8, s))
    assert any("heads 8" in v for v in ev.violations)


def test_evaluate_rejects_a_plan_that_does_not_fit():
    cluster = load_cluster("dgx-a100-80g", 8)
    gpt3 = get_model("gpt3-175b")
    s = Strategy(tp=8, pp=1, dp=1, global_batch=1)
    assert violations(gpt3, 8, s) == []
    ev = evaluate(gpt3, cluster, s)
    assert not ev.feasible and ev.metrics is None
    assert ev.peak_memory > cluster.gpu.hbm_bytes
    assert len(ev.violations) == 1 and "GiB" in ev.violations[0] and "A100" in ev.violations[0]


def test_evaluate_scores_a_feasible_plan(tiny_gpt, a100_64):
    s = Strategy(tp=2, pp=2, dp=16, micro_batch=2, global_batch=256, schedule="interleaved", virtual_stages=2,
                 sequence_parallel=True, recompute="selective", zero=1)
    ev = evaluate(tiny_gpt, a100_64, s)
    assert ev.feasible and ev.violations == ()
    assert ev.metrics is not None
    assert ev.metrics.step_time == pytest.approx(score(tiny_gpt, a100_64, s).step_time, rel=1e-12)
    assert ev.peak_memory == ev.metrics.peak_memory


def test_plans_of_one_shape_share_a_graph_and_score_as_if_built_alone(tiny_gpt, a100_64):
    # the task graph is cached per shape (schedule, pp, micro-batches, chunks, DP flags); TP, sequence
    # parallelism and recompute change only durations, so a graph built for one plan must serve the others (link
    # contention off: with it on, these plans' PP sends and DP collectives share links and take the graph path)
    from dataclasses import replace

    from autoplan.sim import program
    cluster = replace(a100_64, contention=False)
    plans = [Strategy(tp=tp, pp=4, dp=16 // tp, micro_batch=1, global_batch=(16 // tp) * 24, schedule="interleaved",
                      virtual_stages=2, sequence_parallel=tp > 1, recompute=rc, zero=1)
             for tp in (1, 2, 4) for rc in ("none", "full")]
    program._program.cache_clear()
    shared = [score(tiny_gpt, cluster, s) for s in plans]
    assert program._program.cache_info().misses == 2          # one program per steady-state point, for all six
    alone = []
    for s in plans:
        program._program.cache_clear()
        program._pair.cache_clear()
        alone.append(score(tiny_gpt, cluster, s))
    assert shared == alone
    sim = simulate_step(tiny_gpt, a100_64, plans[0])
    assert sim.lowered.meta[sim.lowered.compute_tasks[0][0]] == (0, True, 0, 0, "")
    assert set(sim.lowered.parts) == {i for ids in sim.lowered.compute_tasks for i in ids}


def test_short_steps_are_simulated_whole_and_long_ones_extended(tiny_gpt, a100_8, monkeypatch):
    # score()'s cost floor: with the C runner a step of fewer than EXTENDED_FROM_PASSES chunk passes is simulated
    # whole (its samples would cost more), a longer one extended from samples; the same step time either way
    monkeypatch.setattr(simulate, "EXTENDED_FROM_PASSES", 8192)
    s = Strategy(pp=4, dp=2, micro_batch=1, global_batch=2 * 64, schedule="1f1b")
    extended = []
    real = simulate._extrapolated
    monkeypatch.setattr(simulate, "_extrapolated", lambda *a: extended.append(a[2]) or real(*a))
    short = score(tiny_gpt, a100_8, s)
    assert extended == ([] if simulate.pipeline.compiled() else [s])
    monkeypatch.setattr(simulate, "EXTENDED_FROM_PASSES", 4 * 64)
    long = score(tiny_gpt, a100_8, s)
    assert extended[-1] == s and long.step_time == pytest.approx(short.step_time, rel=1e-12)
