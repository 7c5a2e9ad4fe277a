"""Transfers sharing links as a fluid: max-min fair shares on hand-made links, and timelines (first order and
event-driven) that never run a transfer faster than alone."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.sim.engine import Tasks, plan_of, run
from autoplan.sim.fluid import Sharing, contended, shares, simulate


def _one_link(*loads: float) -> Sharing:
    return Sharing((tuple(enumerate(loads)),), len(loads))


def test_two_equal_transfers_on_one_link_get_half_each():
    assert shares([0, 1], _one_link(1.0, 1.0)) == [0.5, 0.5]
    t = Tasks()
    a, b = t.stream("a"), t.stream("b")
    x, y = t.add(a, 2.0), t.add(b, 2.0)
    plan = plan_of(t)
    for exact in (False, True):
        tl = contended(t, plan, run(t, plan), [0, 1], _one_link(1.0, 1.0), exact=exact)
        assert (tl.end[x], tl.end[y]) == (4.0, 4.0)
        assert tl.tasks.duration == [4.0, 4.0] and t.duration == [2.0, 2.0]
    # three on one link: a third each, three times as long (exactly, also to first order)
    t.add(t.stream("c"), 2.0)
    three = Sharing((((0, 1.0), (1, 1.0), (2, 1.0)),), 3)
    assert contended(t, plan_of(t), run(t), [0, 1, 2], three).makespan == pytest.approx(6.0)


def test_a_small_transfer_keeps_its_rate_beside_a_large_one_that_takes_the_rest():
    # max-min in bandwidth: 30 % of the link is under the fair half, so it is served whole
    assert shares([0, 1], _one_link(0.3, 1.0)) == pytest.approx([1.0, 0.7])
    assert shares([0, 0], _one_link(0.4)) == [1.0, 1.0]         # one class twice: 80 % of the link, no slowdown


def test_a_link_overloaded_alone_slows_its_class_alone():
    # four times the uplink's bandwidth (a 4:1 oversubscribed spine): a quarter of the rate
    sharing = Sharing(((( 0, 4.0),),), 1)
    t = Tasks()
    t.add(t.stream("a"), 1.0)
    plan = plan_of(t)
    assert contended(t, plan, run(t, plan), [0], sharing).makespan == pytest.approx(4.0)
    assert contended(t, plan, run(t, plan), [0], sharing, exact=True).makespan == pytest.approx(4.0)


def test_a_transfer_that_overlaps_part_of_another_speeds_up_when_it_ends():
    # x alone from 0 to 1, both at half to ... y (2 s of work) starts at 1: from 1 both at half; x has 1 s left -> ends
    # at 3; y did 1 s of work by then, the rest alone -> ends at 4
    t = Tasks()
    a, b = t.stream("a"), t.stream("b")
    x = t.add(a, 2.0)
    gate = t.add(b, 1.0)
    y = t.add(b, 2.0)
    cls = [0, -1, 1]
    plan = plan_of(t)
    tl = contended(t, plan, run(t, plan), cls, _one_link(1.0, 1.0), exact=True)
    assert (tl.end[x], tl.end[gate], tl.end[y]) == pytest.approx((3.0, 1.0, 4.0))
    assert simulate(t, plan, cls, _one_link(1.0, 1.0)).end == pytest.approx(tl.end)
    # to first order: the 1 s of overlap on the engine's timeline at half rate costs each 1 s more
    first = contended(t, plan, run(t, plan), cls, _one_link(1.0, 1.0))
    assert (first.end[x], first.end[y]) == pytest.approx((3.0, 4.0))


def test_nothing_shared_is_the_engines_timeline_itself():
    t = Tasks()
    a, b = t.stream("a"), t.stream("b")
    t.add(a, 1.0)
    t.add(b, 1.0, (0,))
    plan = plan_of(t)
    tl = run(t, plan)
    for exact in (False, True):
        assert contended(t, plan, tl, [0, 1], _one_link(1.0, 1.0), exact=exact) is tl   # one after the other
        assert contended(t, plan, tl, [0, -1], _one_link(1.0, 1.0), exact=exact) is tl


@st.composite
def _shared_graphs(draw):
    n = draw(st.integers(1, 25))
    streams = draw(st.integers(1, 4))
    classes = draw(st.integers(1, 3))
    t = Tasks()
    ids = [t.stream(f"s{r}") for r in range(streams)]
    cls = []
    for i in range(n):
        deps = sorted(draw(st.sets(st.integers(0, i - 1), max_size=min(2, i)))) if i else []
        t.add(ids[draw(st.integers(0, streams - 1))], draw(st.floats(0.0, 5.0)), tuple(deps))
        cls.append(draw(st.integers(-1, classes - 1)))
    rows = draw(st.lists(st.lists(st.tuples(st.integers(0, classes - 1), st.floats(0.05, 2.0)), min_size=1,
                                  max_size=3, unique_by=lambda x: x[0]), max_size=3))
    return t, cls, Sharing(tuple(tuple(r) for r in rows), classes)


@settings(max_examples=60, deadline=None)
@given(_shared_graphs(), st.booleans())
def test_sharing_never_makes_a_transfer_faster(graph, exact):
    t, cls, sharing = graph
    plan = plan_of(t)
    alone = run(t, plan)
    tl = contended(t, plan, alone, cls, sharing, exact=exact)
    for i in range(len(t)):
        assert tl.end[i] - tl.start[i] >= t.duration[i] - 1e-9        # no transfer faster than alone
        assert tl.end[i] >= alone.end[i] - 1e-9                       # nor anything earlier
        if cls[i] < 0:
            assert tl.end[i] - tl.start[i] == pytest.approx(t.duration[i], abs=1e-9)
    for j in range(len(t)):                                           # every task starts as its inputs end
        ready = max([tl.end[d] for d in t.deps[j]] + ([tl.end[plan.prev[j]]] if plan.prev[j] >= 0 else []) + [0.0])
        assert tl.start[j] == pytest.approx(ready, abs=1e-9)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=6),
       st.lists(st.lists(st.floats(0.05, 3.0), min_size=3, max_size=3), min_size=1, max_size=3))
def test_shares_fill_no_link_past_its_bandwidth_and_leave_none_idle_for_a_slowed_task(active, loads):
    sharing = Sharing(tuple(tuple(enumerate(row)) for row in loads), 3)
    got = shares(active, sharing)
    assert all(0 < x <= 1 for x in got)
    used = [sum(dict(row)[k] * x for k, x in zip(active, got)) for row in sharing.rows]
    assert all(u <= 1 + 1e-9 for u in used)
    for a, x in enumerate(got):
        if x < 1 - 1e-9:                      # slowed: some link it uses is full
            assert any(u >= 1 - 1e-9 for u in used)


_UTILISATIONS = st.one_of(st.sampled_from([0.25, 0.5, 1.0, 1.5, 2.0]), st.floats(0.05, 3.0))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(st.just(n), st.lists(
    st.lists(st.tuples(st.integers(0, n - 1), _UTILISATIONS), min_size=1, max_size=n, unique_by=lambda e: e[0]),
    min_size=1, max_size=8))))
def test_the_pairwise_filling_gives_the_general_fillings_floats(case):
    from autoplan.sim.fluid import _filling, _pair_filling

    n, rows = case
    sharing = Sharing(tuple(tuple(sorted(row)) for row in rows), n)
    for k in range(n):
        for c in range(k, n):                     # ties of level, of weight and one class twice included
            assert _pair_filling((k, c), sharing) == _filling((k, c), sharing)
