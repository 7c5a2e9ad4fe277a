"""The fast path (sim/program.py, sim/pipeline.py) against the task graph and the engine: the same floats, bit for
bit, for every schedule, DP option and transfer mode, with link contention off (the fast path times the graph the
engine times); with contention on, ``simulate._totals`` (the fast path, contended by ``sim/flows.py``: see
test_flows.py) against the contended graph; the two steady-state samples run once where they agree."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.validity import violations
from autoplan.sim import contention, pipeline, program, simulate
from autoplan.sim.simulate import _graph_totals, _with_micro_batches, score
from autoplan.specs.cluster import load_cluster


pytestmark = pytest.mark.usefixtures("extend_short_steps_too")


_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1", "zbv", "dualpipev", "dualpipe")


@st.composite
def _plans(draw):
    """A valid plan of the tiny GPT (8 layers) on 8 or 64 GPUs, any schedule, DP and p2p option."""
    gpus = draw(st.sampled_from([8, 64]))
    tp, pp, cp = (draw(st.sampled_from(x)) for x in ([1, 2, 4], [1, 2, 4, 8], [1, 1, 2]))
    assume(gpus % (tp * pp * cp) == 0)
    schedule = draw(st.sampled_from(SCHEDULES))
    v = draw(st.sampled_from([2, 4])) if schedule == "interleaved" else 1
    m = draw(st.integers(1, 36))
    if schedule == "interleaved":
        m = pp * draw(st.integers(1, 6))
    dp = gpus // (tp * pp * cp)
    s = Strategy(tp=tp, pp=pp, dp=dp, cp=cp, micro_batch=1, global_batch=m * dp, schedule=schedule,
                 virtual_stages=v, sequence_parallel=tp > 1 and draw(st.booleans()),
                 recompute=draw(st.sampled_from(["none", "selective", "full"])), zero=draw(st.sampled_from([0, 1, 2, 3])),
                 overlap_grad_reduce=draw(st.booleans()), overlap_param_gather=draw(st.booleans()),
                 overlap_p2p_comm=draw(st.booleans()), grad_reduce_in_fp32=draw(st.booleans()))
    return gpus, s


def _cluster(gpus, a100_8, a100_64, contended=False):
    """The plan's cluster, with link contention off unless ``contended`` (the fast path mirrors the engine's graph;
    contention re-times that graph, ``sim/contention.py``)."""
    cluster = a100_8 if gpus == 8 else a100_64
    return cluster if contended else replace(cluster, contention=False)


def _off(cluster):
    return replace(cluster, contention=False)


@settings(max_examples=150, **_SETTINGS)
@given(_plans())
def test_fast_path_is_the_graph_bit_for_bit(tiny_gpt, a100_8, a100_64, plan):
    gpus, s = plan
    assume(not violations(tiny_gpt, gpus, s))
    cluster = _cluster(gpus, a100_8, a100_64)
    program._program.cache_clear()
    assert repr(pipeline.totals(tiny_gpt, cluster, s)) == repr(_graph_totals(tiny_gpt, cluster, s))


@settings(max_examples=60, **_SETTINGS)
@given(_plans())
def test_totals_are_the_contended_graphs(tiny_gpt, a100_8, a100_64, plan):
    # link contention on (the clusters' default): the fast path, contended where links are shared (sim/flows.py):
    # the contended graph's floats, bit for bit (test_gpt3_scores_are_the_graphs: extrapolated)
    gpus, s = plan
    assume(not violations(tiny_gpt, gpus, s))
    cluster = _cluster(gpus, a100_8, a100_64, contended=True)
    program._program.cache_clear()
    assert repr(simulate._totals(tiny_gpt, cluster, s)) == repr(_graph_totals(tiny_gpt, cluster, s))


@settings(max_examples=40, **_SETTINGS)
@given(_plans())
def test_contention_is_inert_only_where_it_changes_nothing(tiny_gpt, a100_8, a100_64, plan):
    # contention.inert: the graph's flow classes are among possible_classes, and where it says inert the contended
    # graph is the engine's graph untouched
    gpus, s = plan
    assume(not violations(tiny_gpt, gpus, s))
    cluster = _cluster(gpus, a100_8, a100_64, contended=True)
    sim = simulate.simulate_step(tiny_gpt, cluster, s)
    classes = set(contention.flow_classes(sim.lowered)[1])
    assert classes <= set(contention.possible_classes(s.pp)) | {("pp", a, a) for a in range(s.pp)}
    if contention.inert(cluster, s):
        assert sim.lowered.stretched is None
        assert repr(pipeline.totals(tiny_gpt, cluster, s)) == repr(_graph_totals(tiny_gpt, cluster, s))


def test_plans_without_a_pipeline_take_the_fast_path_with_contention_on(tiny_gpt, a100_64, monkeypatch):
    # pp 1: no PP sends, one DP class: nothing to share a link with; the fast path answers (the graph is never built)
    s = Strategy(tp=2, pp=1, dp=32, micro_batch=1, global_batch=32 * 6, zero=1)
    assert contention.inert(a100_64, s)
    want = _graph_totals(tiny_gpt, a100_64, s)
    monkeypatch.setattr(simulate, "simulate_step", None)
    assert repr(simulate._totals(tiny_gpt, a100_64, s)) == repr(want)
    assert not contention.inert(a100_64, replace(s, pp=2, dp=16))
    assert contention.inert(_off(a100_64), replace(s, pp=2, dp=16))


@settings(max_examples=60, **_SETTINGS)
@given(_plans(), st.integers(1, 12))
def test_two_samples_run_once_are_each_run_alone(tiny_gpt, a100_8, a100_64, plan, more):
    gpus, s = plan
    assume(not violations(tiny_gpt, gpus, s))
    cluster = _cluster(gpus, a100_8, a100_64)
    a, b = s, _with_micro_batches(s, s.micro_batches + more)
    assume(not violations(tiny_gpt, gpus, b))
    pair = pipeline.totals_pair(tiny_gpt, cluster, a, b)
    assert repr(pair) == repr((_graph_totals(tiny_gpt, cluster, a), _graph_totals(tiny_gpt, cluster, b)))


@pytest.mark.parametrize("schedule,v", [("interleaved", 3), ("1f1b", 1), ("zb-h1", 1)])
def test_gpt3_steady_state_samples_share_most_of_the_shorter_run(schedule, v):
    # pp 32: the samples of 64 and 96 micro-batches; the first 75 % of the shorter one is the longer one's
    model, cluster = get_model("gpt3"), _off(load_cluster("dgx-h100-80g", 1024))
    s = Strategy(dp=4, tp=8, pp=32, micro_batch=1, global_batch=1536, schedule=schedule, virtual_stages=v,
                 sequence_parallel=True, zero=2, overlap_p2p_comm=True)
    a, b = _with_micro_batches(s, 64), _with_micro_batches(s, 96)
    shape_a, _ = pipeline.slot_costs(model, cluster, a)
    shape_b, _ = pipeline.slot_costs(model, cluster, b)
    shared, _ = program.pair_split(shape_a, shape_b)
    tasks = len(program.program(shape_a, 96).arrays["slot"])
    assert sum(shared) >= 0.7 * tasks
    assert repr(pipeline.totals_pair(model, cluster, a, b)) == repr((_graph_totals(model, cluster, a),
                                                                     _graph_totals(model, cluster, b)))


@pytest.mark.parametrize("contended", [False, True])
def test_gpt3_scores_are_the_graphs(monkeypatch, contended):
    # plans of the default and zero-bubble spaces, extrapolated or not: score() through the fast path and through
    # the graph give the same metrics, bit for bit, with link contention off and on
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    cluster = cluster if contended else _off(cluster)
    plans = [Strategy(dp=64, tp=4, pp=4, micro_batch=2, global_batch=1536, schedule="interleaved", virtual_stages=12,
                      sequence_parallel=True, zero=2),
             Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, schedule="1f1b", sequence_parallel=True,
                      zero=1, recompute="selective"),
             Strategy(dp=16, tp=4, pp=16, micro_batch=1, global_batch=1536, schedule="dualpipe",
                      sequence_parallel=True, zero=1),
             Strategy(dp=32, tp=4, pp=8, micro_batch=1, global_batch=1536, schedule="zbv", sequence_parallel=True,
                      zero=1),
             Strategy(dp=128, tp=8, pp=1, micro_batch=1, global_batch=1536, sequence_parallel=True, zero=1)]
    fast = [score(model, cluster, s) for s in plans]
    monkeypatch.setattr(simulate, "_totals", _graph_totals)
    monkeypatch.setattr(pipeline, "totals_pair", lambda m, c, a, b: (_graph_totals(m, c, a), _graph_totals(m, c, b)))
    assert [repr(x) for x in fast] == [repr(score(model, cluster, s)) for s in plans]


def test_a_pipeline_that_waits_on_itself_raises():
    # a program whose first task waits for a transfer no task sends
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    s = Strategy(dp=64, tp=4, pp=4, micro_batch=2, global_batch=1536, schedule="1f1b", sequence_parallel=True)
    shape, cost = pipeline.slot_costs(model, cluster, s)
    prog = program.program(shape)
    keys = prog.arrays["key"].copy()
    keys[prog.arrays["bounds"][1]] = prog.transfers - 1
    broken = replace(prog, arrays=prog.arrays | {"key": keys}, made={})
    with pytest.raises(pipeline.CycleError):
        pipeline.run(broken, cost)


@pytest.mark.parametrize("space", ["default", "zero-bubble"])
def test_gpt3_plans_of_the_spaces_are_the_graphs(space):
    # every DP option of a real model (bucket-sized backward pieces, ZeRO-2 reduce-scatters, overlapped gathers):
    # 30 plans drawn from the space, simulated whole through both paths (contention off); with contention on,
    # simulate._totals is the contended graph's answer
    import random

    from autoplan.search.space import enumerate_plans, load_space
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 256)
    plans, _ = enumerate_plans(model, 256, load_space(space), 128)
    for s in random.Random(space).sample(plans, 30):
        program._program.cache_clear()
        assert repr(pipeline.totals(model, _off(cluster), s)) == repr(_graph_totals(model, _off(cluster), s)), \
            s.short()
        assert repr(simulate._totals(model, cluster, s)) == repr(_graph_totals(model, cluster, s)), s.short()


@pytest.mark.parametrize("schedule,pp,dp", [("zbv", 2, 4), ("dualpipev", 2, 4), ("dualpipe", 4, 2)])
def test_v_shapes_sampled_until_settled_are_the_full_simulation(tiny_gpt, a100_8, schedule, pp, dp, monkeypatch):
    # from SAMPLED_FROM_PERIODS periods on, V shapes and DualPipe are extended from sample runs whose increments
    # agree: the full simulation's answer to rounding; DualPipe's settle without a full run (its samples' cost
    # floor, FUSED_SAMPLED_FROM_PASSES, lifted: this step is short)
    monkeypatch.setattr(simulate, "FUSED_SAMPLED_FROM_PASSES", 0)
    m = simulate.SAMPLED_FROM_PERIODS * pp + 3 * pp
    s = Strategy(tp=1, pp=pp, dp=dp, micro_batch=1, global_batch=m * dp, schedule=schedule, zero=1)
    assert not violations(tiny_gpt, 8, s)
    runs = []
    totals = simulate._totals
    monkeypatch.setattr(simulate, "_totals", lambda *a: runs.append(a[2].micro_batches) or totals(*a))
    got = simulate._extrapolated(tiny_gpt, a100_8, s)
    assert got is not None
    assert simulate._agrees(got, _graph_totals(tiny_gpt, a100_8, s), rel=1e-9)
    if schedule in ("dualpipev", "dualpipe"):
        assert m not in runs and len(runs) <= 6, runs


def test_a_long_dualpipe_step_settles_to_rounding_without_a_full_run(monkeypatch):
    # GPT-3 on 1024 H100s, pp 32, 768 micro-batches (24 periods): the fused pairs' breakdown increments differ
    # between samples in their last digits (never equal to 1e-12 of the step), so they settle to SETTLED_TO's
    # 1e-9 and the step is extended from samples of at most 7 periods, not run whole
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    s = Strategy(tp=8, pp=32, dp=2, cp=2, micro_batch=1, global_batch=1536, schedule="dualpipe",
                 sequence_parallel=True)
    assert not violations(model, 1024, s) and s.micro_batches == 768
    full = simulate._totals(model, cluster, s)
    runs = []
    totals = simulate._totals
    monkeypatch.setattr(simulate, "_totals", lambda *a: runs.append(a[2].micro_batches) or totals(*a))
    got = simulate._extrapolated(model, cluster, s)
    assert max(runs) <= 7 * s.pp, runs
    assert simulate._agrees(got, full, rel=1e-9)


def test_a_program_run_again_with_other_seconds_is_run_fresh(tiny_gpt, a100_64):
    # a program's stage lists are kept (as tuples) for the next plan of its shape: the second plan's answer is the
    # one a fresh compile gives
    s = Strategy(tp=2, pp=4, dp=8, micro_batch=1, global_batch=8 * 12, schedule="interleaved", virtual_stages=2,
                 zero=2)
    t = replace(s, recompute="full")
    assert pipeline.slot_costs(tiny_gpt, a100_64, s)[0] == pipeline.slot_costs(tiny_gpt, a100_64, t)[0]
    cluster = _off(a100_64)
    program._program.cache_clear()
    pipeline.totals(tiny_gpt, cluster, s)
    warm = pipeline.totals(tiny_gpt, cluster, t)
    program._program.cache_clear()
    assert repr(warm) == repr(pipeline.totals(tiny_gpt, cluster, t)) == repr(_graph_totals(tiny_gpt, cluster, t))


def test_the_cyclic_collector_is_paused_only_while_compiling_and_running():
    import gc

    seen = []

    @program.cycle_gc_paused
    def inside(fail):
        seen.append(gc.isenabled())
        if fail:
            raise ValueError
    assert gc.isenabled()
    inside(False)
    with pytest.raises(ValueError):
        inside(True)
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        inside(False)
        assert not gc.isenabled()                      # left as the caller had it
    finally:
        gc.enable()
