"""The C runner (sim/_runner.c) against the Python one (``pipeline._run_generators``, fluid's numpy overlaps): the
same floats, bit for bit, on every path ``pipeline.run`` takes: whole runs, the steady-state samples' stops and
resumes, contended reruns, runs stopped before their tails. Skipped where the package was installed without a C
compiler: the Python runner is then the only one, and the rest of tests/sim holds it to the task graph (as it holds
the C runner where it is built)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.families.catalog import get_model
from autoplan.search.space import enumerate_plans, load_space
from autoplan.sim import flows, fluid, pipeline, program, simulate
from autoplan.sim.simulate import _with_micro_batches
from autoplan.sim.workload import slot_costs
from autoplan.specs.cluster import load_cluster
from tests.sim.test_flows import _SETTINGS, pipeline_plans, valid_case

pytestmark = pytest.mark.skipif(pipeline._runner is None,
                                reason="autoplan.sim._runner was not built (no C compiler when installed)")


def _both(fn):
    """``fn()`` with the C runner, then with the Python one (program caches cleared before each; the switches
    restored after)."""
    out = []
    try:
        for compiled in (True, False):
            pipeline.USE_COMPILED = fluid.USE_COMPILED = compiled
            program._program.cache_clear()
            program._pair.cache_clear()
            out.append(fn())
    finally:
        pipeline.USE_COMPILED = fluid.USE_COMPILED = True
    return out


def _recorded(rec: tuple) -> tuple:
    """A run's noted intervals with transfers' ends as floats (the C runner's nan is the Python one's None)."""
    return tuple(np.asarray(x, dtype=float).tobytes() for x in rec)


@settings(max_examples=120, **_SETTINGS)
@given(pipeline_plans())
def test_the_c_runner_times_every_run_as_the_generators(tiny_gpt, a100_64, plan):
    s, cluster = valid_case(tiny_gpt, a100_64, plan)
    shape, cost = slot_costs(tiny_gpt, cluster, s)

    def runs():
        prog = program.program(shape)
        whole, rec, _ = pipeline.run(prog, cost)
        ends, rec_t, _ = pipeline.run(prog, cost, tails=True)
        contended = flows.totals(tiny_gpt, cluster, s)
        before_tails = flows.totals(tiny_gpt, cluster, s, tails=True)
        return (repr(whole), _recorded(rec), repr(pipeline.finish_ends(ends)), _recorded(rec_t), repr(contended),
                repr(pipeline.finish_ends(before_tails)), repr(before_tails.states), repr(before_tails.tail_extra))

    c, py = _both(runs)
    assert c == py


@settings(max_examples=60, **_SETTINGS)
@given(pipeline_plans())
def test_the_c_runner_stops_and_resumes_as_the_generators(tiny_gpt, a100_64, plan):
    # totals_pair: the longer sample run with stops (each stage's state noted there), the shorter resumed from them
    s, cluster = valid_case(tiny_gpt, a100_64, plan)
    b = _with_micro_batches(s, s.micro_batches + s.pp)
    c, py = _both(lambda: repr(pipeline.totals_pair(tiny_gpt, cluster, s, b)))
    assert c == py
    shape_a, cost_a = slot_costs(tiny_gpt, cluster, s)
    shape_b, cost_b = slot_costs(tiny_gpt, cluster, b)
    split = program.pair_split(shape_a, shape_b)
    if split is not None:
        def snaps():
            _, rec, kept = pipeline.run(program.program(shape_b), cost_b, stops=split[0])
            return repr(kept), _recorded(rec)
        c, py = _both(snaps)
        assert c == py


@pytest.mark.parametrize("space", ["default", "zero-bubble"])
def test_gpt3_scores_are_the_same_with_either_runner(space, monkeypatch):
    # GPT-3 on 1024 H100s: 40 plans of each space, extrapolated and contended as a search scores them (the
    # C runner's cost floor for extending a step from samples kept for both)
    monkeypatch.setattr(simulate, "extended_from_passes", lambda: simulate.EXTENDED_FROM_PASSES)
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    plans, _ = enumerate_plans(model, 1024, load_space(space), 1536)
    for s in random.Random(space).sample(plans, 40):
        c, py = _both(lambda: simulate.score(model, cluster, s))
        assert repr((c.step_time, c.stage_breakdown, c.activity)) == \
            repr((py.step_time, py.stage_breakdown, py.activity)), s.short()


@st.composite
def _sharings(draw):
    """Links as rows of (class, utilisation), a class sometimes twice in a row (``fluid._filling``'s case)."""
    classes = draw(st.integers(1, 6))
    util = st.sampled_from([0.1, 0.5, 1.0, 1.5, 2.0]) | st.floats(0.01, 3.0)
    rows = []
    for _ in range(draw(st.integers(1, 6))):
        ks = draw(st.lists(st.integers(0, classes - 1), min_size=1, max_size=classes + 1))
        rows.append(tuple((k, draw(util)) for k in ks))
    return tuple(rows), classes


@settings(max_examples=300, **_SETTINGS)
@given(_sharings())
def test_the_c_runner_shares_every_pair_as_the_pairwise_filling(case):
    rows, classes = case
    pairs = [(a, b) for a in range(classes) for b in range(a, classes)]
    c, py = fluid.Sharing(rows, classes), fluid.Sharing(rows, classes)
    c.know_pairs(pairs)
    for q in pairs:
        assert repr(c.share_of(q)) == repr(py.share_of(q)), q


@settings(max_examples=200, **_SETTINGS)
@given(_sharings(), st.data())
def test_the_c_runner_pairs_groups_as_the_python_loop(case, data):
    # fluid._pairs_of: every two groups whose classes share a link, with the factor that slows one beside the other,
    # in the same order (the order stretch sums them in)
    rows, classes = case
    groups = tuple(data.draw(st.lists(st.integers(0, classes - 1), min_size=1, max_size=10)))
    got = fluid._pairs_of(groups, fluid.Sharing(rows, classes))
    try:
        fluid.USE_COMPILED = False
        want = fluid._pairs_of(groups, fluid.Sharing(rows, classes))
    finally:
        fluid.USE_COMPILED = True
    assert [x.tobytes() for x in got] == [x.tobytes() for x in want]
