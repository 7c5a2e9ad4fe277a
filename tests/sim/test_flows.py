"""The contended fast path (sim/flows.py) against the contended task graph (``simulate._graph_totals``, i.e.
``contention.contend``): the same flow classes and groups, the same intervals, the same floats bit for bit, for
every schedule, DP option and transfer mode, on clusters whose links are shared (oversubscribed spines too); the
steady-state extension with contention on still the full simulation's answer."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.validity import violations
from autoplan.sim import contention, flows, pipeline, program, simulate
from autoplan.sim.engine import run
from autoplan.sim.simulate import _graph_totals
from autoplan.sim.workload import lower, slot_costs
from autoplan.specs.cluster import load_cluster

_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1", "zbv", "dualpipev", "dualpipe")


@st.composite
def pipeline_plans(draw, uneven: bool = False):
    """A valid plan of the tiny GPT on 64 GPUs with a pipeline (pp > 1), any schedule, DP and p2p option, and an
    oversubscription of the cluster's spine; with ``uneven``, sometimes one layer fewer on the first stage."""
    tp, pp, cp = (draw(st.sampled_from(x)) for x in ([1, 2, 4], [2, 4, 8], [1, 1, 2]))
    schedule = draw(st.sampled_from(SCHEDULES))
    v = draw(st.sampled_from([2, 4])) if schedule == "interleaved" else 1
    m = pp * draw(st.integers(1, 6)) if schedule == "interleaved" else draw(st.integers(1, 36))
    dp = 64 // (tp * pp * cp)
    s = Strategy(tp=tp, pp=pp, dp=dp, cp=cp, micro_batch=1, global_batch=m * dp, schedule=schedule,
                 virtual_stages=v, sequence_parallel=tp > 1 and draw(st.booleans()),
                 recompute=draw(st.sampled_from(["none", "selective", "full"])),
                 zero=draw(st.sampled_from([0, 1, 2, 3])), overlap_grad_reduce=draw(st.booleans()),
                 overlap_param_gather=draw(st.booleans()), overlap_p2p_comm=draw(st.booleans()),
                 grad_reduce_in_fp32=draw(st.booleans()),
                 first_stage_layers=draw(st.sampled_from([0, 0, 1])) if uneven else 0)
    return s, draw(st.sampled_from([1.0, 2.0, 4.0]))


def _cluster(a100_64, oversubscription):
    return a100_64.scaled(oversubscription=oversubscription) if oversubscription > 1 else a100_64


def valid_case(tiny_gpt, a100_64, plan):
    """A drawn ``pipeline_plans`` case as (plan, cluster); hypothesis discards it when the plan is invalid."""
    s, over = plan
    assume(not violations(tiny_gpt, 64, s))
    return s, _cluster(a100_64, over)


@settings(max_examples=300, **_SETTINGS)
@given(pipeline_plans())
def test_contended_fast_path_is_the_contended_graph_bit_for_bit(tiny_gpt, a100_64, plan):
    s, cluster = valid_case(tiny_gpt, a100_64, plan)
    program._program.cache_clear()
    assert repr(flows.totals(tiny_gpt, cluster, s)) == repr(_graph_totals(tiny_gpt, cluster, s))


@settings(max_examples=40, **_SETTINGS)
@given(pipeline_plans())
def test_flow_classes_groups_and_intervals_are_the_graphs(tiny_gpt, a100_64, plan):
    # the program's classes and groups are contention's of the graph, position for position, and the fast path's
    # intervals are the engine's (each stage's DP stream noted whole)
    s, cluster = valid_case(tiny_gpt, a100_64, plan)
    lowered = lower(tiny_gpt, cluster, s)
    cls, classes, grouped = contention._of_graph(lowered)
    shape, cost = slot_costs(tiny_gpt, cluster, s)
    prog = program.program(shape)
    fl = flows.flows(prog)
    assert fl.classes == classes and fl.group_classes == grouped.classes
    assert fl.bounds.tolist() == grouped.bounds.tolist()
    assert fl.resource.tolist() == [lowered.tasks.resource[i] for i in grouped.ids]
    timeline = run(lowered.tasks, lowered.plan)
    _, recorded, _ = pipeline.run(prog, cost)
    # every stage's DP stream noted whole, each in its block of the flat notes
    assert len(recorded[3]) == fl.dp_bounds[-1] == pipeline.dp_bounds(prog)[-1]
    assert not np.isnan(recorded[2]).any() and not np.isnan(recorded[3]).any()
    start, end = flows.intervals(fl, recorded)
    assert start.tolist() == list(grouped.pick(timeline.start))
    assert end.tolist() == list(grouped.pick(timeline.end))


def test_slowed_plans_take_the_fast_path_and_are_the_graphs(monkeypatch):
    # GPT-3 plans whose transfers do share links (the graph slows some; the second's sends hold the compute
    # stream): simulate._totals never builds the graph
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    plans = [Strategy(dp=64, tp=4, pp=4, micro_batch=2, global_batch=512, schedule="interleaved", virtual_stages=12,
                      sequence_parallel=True, zero=2),
             Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=256, schedule="1f1b", sequence_parallel=True,
                      zero=1),
             Strategy(dp=32, tp=4, pp=8, micro_batch=1, global_batch=512, schedule="dualpipev",
                      sequence_parallel=True, zero=2)]
    want = []
    for s in plans:
        sim = simulate.simulate_step(model, cluster, s)
        assert sim.lowered.stretched and max(sim.lowered.stretched) > 0
        want.append(_graph_totals(model, cluster, s))
    monkeypatch.setattr(simulate, "simulate_step", None)
    assert [repr(simulate._totals(model, cluster, s)) for s in plans] == [repr(w) for w in want]


@pytest.mark.parametrize("schedule,v,tp", [("1f1b", 1, 2), ("interleaved", 2, 1), ("gpipe", 1, 1)])
def test_extended_contended_steps_are_the_full_simulation(tiny_gpt, a100_64, schedule, v, tp):
    # contention on (ZeRO-2's reduce-scatters share links with the PP sends: 0.9-5.6 % slower): the steady-state
    # extension of two contended sample runs is the full contended simulation's answer to rounding
    pp = 4
    dp = 64 // (tp * pp)
    s = Strategy(tp=tp, pp=pp, dp=dp, micro_batch=1, global_batch=dp * 40, schedule=schedule, virtual_stages=v,
                 zero=2)
    assert not violations(tiny_gpt, 64, s) and not contention.inert(a100_64, s)
    got = simulate._extrapolated(tiny_gpt, a100_64, s)
    assert got is not None
    full = _graph_totals(tiny_gpt, a100_64, s)
    assert full[0] > _graph_totals(tiny_gpt, replace(a100_64, contention=False), s)[0] * 1.005
    assert simulate._agrees(got, full, rel=1e-9)


@settings(max_examples=100, **_SETTINGS)
@given(pipeline_plans())
def test_a_run_stopped_before_its_tails_finishes_to_the_same_floats(tiny_gpt, a100_64, plan):
    s, cluster = valid_case(tiny_gpt, a100_64, plan)
    assert repr(pipeline.finish_ends(flows.totals(tiny_gpt, cluster, s, tails=True))) == repr(
        flows.totals(tiny_gpt, cluster, s))


@pytest.mark.parametrize("schedule,v", [("1f1b", 1), ("zb-h1", 1), ("interleaved", 2)])
def test_a_stream_running_out_of_idle_time(monkeypatch, schedule, v):
    # GPT-3 on 1,024 H100s, ZeRO-2 with contention: each stage's DP stream (a reduce-scatter per micro-batch,
    # slowed by the PP sends sharing its links) gets 0.6 % busier per period than the step at 32 and 48
    # micro-batches, and later sets the pace: the extension of those samples' totals was 0.19-0.39 % short.
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    s = Strategy(tp=8, pp=16, dp=8, micro_batch=1, global_batch=1536, schedule=schedule, virtual_stages=v, zero=2)
    a, b, _ = simulate._steady_state_points(s)
    samples = [flows.totals(model, cluster, simulate._with_micro_batches(s, n)) for n in (a, b)]
    assert simulate._backlogged(*samples)
    full = simulate._totals(model, cluster, s)
    if schedule in simulate.BEFORE_TAILS:
        # extended before the stages' tails, where the saturated DP stream then sets the step: no full run
        monkeypatch.setattr(simulate, "_totals", None)
    got = simulate._extrapolated(model, cluster, s)
    assert got[0] > simulate._extend(samples[0][0], samples[1][0], (s.micro_batches - a) / (b - a)) * 1.001
    assert simulate._agrees(got, full, rel=1e-9)
