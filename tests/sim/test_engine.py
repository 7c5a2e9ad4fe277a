"""The discrete-event core: in-order streams, dependencies, determinism, cycles, and the longest-path oracle."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.sim.engine import (CycleError, SizedCache, Tasks, Timeline, critical_path, plan_of, run, sized_cache,
                                 slack)


def _spans(tl: Timeline) -> list[tuple[float, float]]:
    return list(zip(tl.start, tl.end))


# --------------------------------------------------------------------------------------------- hand-made graphs


def test_empty_graph_has_zero_makespan():
    tl = run(Tasks())
    assert tl.start == [] and tl.end == [] and tl.makespan == 0.0


def test_chain_on_one_stream_runs_back_to_back():
    t = Tasks()
    s = t.stream("gpu")
    for d in (1.0, 2.0, 3.0):
        t.add(s, d)
    tl = run(t)
    assert _spans(tl) == [(0.0, 1.0), (1.0, 3.0), (3.0, 6.0)]
    assert tl.makespan == 6.0


def test_chain_of_dependencies_across_streams():
    t = Tasks()
    a, b, c = t.stream("a"), t.stream("b"), t.stream("c")
    x = t.add(a, 1.0)
    y = t.add(b, 2.0, (x,))
    z = t.add(c, 4.0, (y,))
    tl = run(t)
    assert (tl.start[x], tl.start[y], tl.start[z]) == (0.0, 1.0, 3.0)
    assert tl.makespan == 7.0


def test_two_independent_streams_run_in_parallel():
    t = Tasks()
    a, b = t.stream("a"), t.stream("b")
    for _ in range(3):
        t.add(a, 1.0)
        t.add(b, 2.0)
    tl = run(t)
    assert [tl.start[i] for i in range(0, 6, 2)] == [0.0, 1.0, 2.0]
    assert [tl.start[i] for i in range(1, 6, 2)] == [0.0, 2.0, 4.0]
    assert tl.makespan == 6.0
    assert tl.busy("a") == 3.0 and tl.busy("b") == 6.0


def test_dependency_across_streams_delays_the_dependent_and_its_successors():
    t = Tasks()
    a, b = t.stream("a"), t.stream("b")
    slow = t.add(a, 5.0, label="slow")
    first = t.add(b, 1.0, label="first")
    waits = t.add(b, 1.0, (slow,), label="waits")
    after = t.add(b, 1.0, label="after")
    tl = run(t)
    assert tl.start[first] == 0.0
    assert tl.start[waits] == 5.0                  # the dependency, not the stream, holds it back
    assert tl.start[after] == 6.0                  # in-order stream: the next task queues behind it
    assert tl.makespan == 7.0


def test_stream_stays_in_order_even_when_a_later_task_is_ready():
    t = Tasks()
    a, b = t.stream("a"), t.stream("b")
    blocker = t.add(a, 10.0)
    t.add(b, 1.0, (blocker,))
    free = t.add(b, 1.0)                            # has no deps, but runs after its stream predecessor
    tl = run(t)
    assert tl.start[free] == 11.0


def test_zero_duration_tasks_and_multiple_dependencies():
    t = Tasks()
    a, b, c = t.stream("a"), t.stream("b"), t.stream("c")
    x = t.add(a, 2.0)
    y = t.add(b, 3.0)
    barrier = t.add(c, 0.0, (x, y), kind="barrier")
    z = t.add(a, 1.0, (barrier,))
    tl = run(t)
    assert tl.start[barrier] == tl.end[barrier] == 3.0
    assert tl.start[z] == 3.0 and tl.makespan == 4.0


def test_busy_filters_by_kind_and_unknown_stream_is_idle():
    t = Tasks()
    s = t.stream("gpu")
    t.add(s, 1.5, kind="compute")
    t.add(s, 0.5, kind="comm")
    t.add(s, 2.0, kind="compute")
    tl = run(t)
    assert tl.busy("gpu") == 4.0
    assert tl.busy("gpu", "compute") == 3.5
    assert tl.busy("gpu", "comm") == 0.5
    assert tl.busy("nowhere") == 0.0


def test_stream_ids_are_stable_per_name():
    t = Tasks()
    assert t.stream("x") == 0 and t.stream("y") == 1 and t.stream("x") == 0
    assert t.resources == ["x", "y"]


def test_negative_duration_is_rejected():
    t = Tasks()
    with pytest.raises(ValueError, match="negative"):
        t.add(t.stream("a"), -1.0)


def test_dependency_on_a_task_added_later_is_honoured():
    # workload.lower appends a pipeline send to a pass's deps after the pass was added
    t = Tasks()
    a, b = t.stream("a"), t.stream("b")
    deps: list[int] = []
    consumer = t.add(a, 1.0, deps)
    producer = t.add(b, 4.0)
    deps.append(producer)
    tl = run(t)
    assert tl.start[consumer] == 4.0 and tl.makespan == 5.0


def _example_graph() -> Tasks:
    t = Tasks()
    streams = [t.stream(f"s{i}") for i in range(3)]
    ids: list[int] = []
    for k in range(30):
        deps = tuple(j for j in ids if (k * 7 + j * 3) % 5 == 0)[-3:]
        ids.append(t.add(streams[k % 3], 0.1 * ((k * 13) % 7 + 1), deps, label=f"t{k}"))
    return t


def test_same_graph_twice_gives_identical_times():
    one, two = run(_example_graph()), run(_example_graph())
    assert one.start == two.start and one.end == two.end
    again = run(_example_graph())
    assert again.start == one.start and again.end == one.end


def test_with_durations_copies_the_graph_and_checks_durations():
    t = _example_graph()
    doubled = t.with_durations([2 * d for d in t.duration])
    assert doubled.deps == t.deps and doubled.resource == t.resource and doubled.duration != t.duration
    doubled.add(doubled.stream("s0"), 1.0)
    assert len(t) == 30 and len(doubled) == 31          # a copy: adding to it leaves the original alone
    with pytest.raises(ValueError, match="durations for"):
        t.with_durations([1.0])
    with pytest.raises(ValueError, match="negative"):
        t.with_durations([-1.0] * len(t))


# --------------------------------------------------------------------------------------------------------- cycles


def test_cycle_through_dependencies_raises():
    t = Tasks()
    a, b = t.stream("a"), t.stream("b")
    deps_x: list[int] = []
    x = t.add(a, 1.0, deps_x, label="x")
    y = t.add(b, 1.0, (x,), label="y")
    deps_x.append(y)
    with pytest.raises(CycleError, match="cycle"):
        run(t)


def test_self_dependency_raises():
    t = Tasks()
    deps: list[int] = []
    i = t.add(t.stream("a"), 1.0, deps, label="me")
    deps.append(i)
    with pytest.raises(CycleError):
        run(t)


def test_cycle_through_stream_order_raises():
    # A and B on stream X, A added first (so B waits for A), and A depends on B
    t = Tasks()
    x = t.stream("X")
    deps_a: list[int] = []
    t.add(x, 1.0, deps_a, label="A")
    b = t.add(x, 1.0, label="B")
    deps_a.append(b)
    with pytest.raises(CycleError):
        run(t)


def test_cycle_through_two_streams_and_stream_order_raises():
    # X runs A then B, Y runs C then D; C waits for B, D waits for C (stream order), B waits for D: a cycle
    t = Tasks()
    x, y = t.stream("X"), t.stream("Y")
    t.add(x, 1.0, label="A")
    deps_b: list[int] = []
    b = t.add(x, 1.0, deps_b, label="B")
    t.add(y, 1.0, (b,), label="C")
    d = t.add(y, 1.0, label="D")
    deps_b.append(d)
    with pytest.raises(CycleError):
        run(t)


def test_cycle_error_is_a_value_error():
    assert issubclass(CycleError, ValueError)


# ------------------------------------------------------------------------------------------- the size-bounded cache


def _counting_cache(max_size: int) -> tuple[SizedCache, list[int]]:
    calls: list[int] = []

    @sized_cache(max_size, len)
    def build(n: int) -> str:
        """n characters."""
        calls.append(n)
        return "x" * n

    return build, calls


def test_sized_cache_keeps_answers_until_their_total_size_passes_the_bound():
    build, calls = _counting_cache(10)
    assert build(4) == "xxxx" and build(4) == "xxxx"
    assert calls == [4]
    build(5)                                   # 9 of 10
    build(3)                                   # 12: the least recently used (4) goes
    assert build.cache_info() == (1, 3, 10, 8)
    build(5)
    build(4)
    assert calls == [4, 5, 3, 4]
    assert build.__name__ == "build" and build.__doc__ == "n characters." and build.__module__ == __name__


def test_sized_cache_evicts_the_least_recently_used():
    build, calls = _counting_cache(10)
    build(4), build(5), build(4)               # 4 is now the most recent
    build(3)                                   # evicts 5, not 4
    build(4)
    assert calls == [4, 5, 3]
    build(5)
    assert calls == [4, 5, 3, 5]


def test_sized_cache_does_not_keep_an_answer_larger_than_the_bound():
    build, calls = _counting_cache(10)
    build(2)
    assert build(11) == "x" * 11 and build(11) == "x" * 11
    build(2)
    assert calls == [2, 11, 11]
    assert build.cache_info().currsize == 2


def test_sized_cache_clear_forgets_everything():
    build, calls = _counting_cache(10)
    build(2)
    build.cache_clear()
    assert build.cache_info() == (0, 0, 10, 0)
    build(2)
    assert calls == [2, 2]


# ------------------------------------------------------------------------------------------- random-DAG properties


def _longest_path_oracle(n: int, resource: list[int], duration: list[float], deps: list[list[int]]):
    """Earliest start of every task via Kahn's order over deps + stream order; None if there is a cycle."""
    prev = [-1] * n
    last: dict[int, int] = {}
    for i in range(n):
        prev[i] = last.get(resource[i], -1)
        last[resource[i]] = i
    preds = [list(deps[i]) + ([prev[i]] if prev[i] >= 0 else []) for i in range(n)]
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [len(p) for p in preds]
    for i, ps in enumerate(preds):
        for p in ps:
            succ[p].append(i)
    ready = [i for i in range(n) if indeg[i] == 0]
    start = [0.0] * n
    seen = 0
    while ready:
        i = ready.pop()
        seen += 1
        start[i] = max((start[p] + duration[p] for p in preds[i]), default=0.0)
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    return start if seen == n else None, preds


@st.composite
def _dags(draw, forward_refs: bool = False):
    n = draw(st.integers(0, 40))
    streams = draw(st.integers(1, 5))
    resource, duration, deps = [], [], []
    for i in range(n):
        resource.append(draw(st.integers(0, streams - 1)))
        duration.append(draw(st.one_of(st.just(0.0), st.floats(0.0, 10.0, allow_nan=False, allow_infinity=False),
                                       st.integers(1, 5).map(float))))
        pool = n if forward_refs else i
        k = draw(st.integers(0, min(3, pool)))
        deps.append(sorted(draw(st.sets(st.integers(0, pool - 1), min_size=k, max_size=k))) if pool else [])
    return resource, duration, deps


def _build(resource, duration, deps) -> Tasks:
    t = Tasks()
    names = [t.stream(f"s{r}") for r in range(max(resource, default=-1) + 1)]
    for i, (r, d, ds) in enumerate(zip(resource, duration, deps)):
        t.add(names[r], d, tuple(ds), label=f"t{i}")
    return t


def _check_timeline(tl: Timeline, resource, duration, deps):
    n = len(duration)
    eps = 1e-9
    for i in range(n):
        assert tl.start[i] >= 0.0
        assert tl.end[i] == pytest.approx(tl.start[i] + duration[i], abs=eps)
        for d in deps[i]:
            assert tl.end[d] <= tl.start[i] + eps, f"task {i} starts before its dependency {d} ends"
    by_stream: dict[int, list[int]] = {}
    for i, r in enumerate(resource):
        by_stream.setdefault(r, []).append(i)
    for ids in by_stream.values():
        for a, b in zip(ids, ids[1:]):
            # stream order respected, hence no two spans of a stream overlap
            assert tl.end[a] <= tl.start[b] + eps
        spans = sorted((tl.start[i], tl.end[i]) for i in ids)
        for (s0, e0), (s1, e1) in zip(spans, spans[1:]):
            assert e0 <= s1 + eps
    if n:
        assert tl.makespan <= sum(duration) + eps
        assert tl.makespan >= max(duration) - eps


@settings(max_examples=60, deadline=None)
@given(_dags())
def test_random_dags_respect_streams_deps_and_critical_path(dag):
    resource, duration, deps = dag
    tl = run(_build(resource, duration, deps))
    _check_timeline(tl, resource, duration, deps)
    oracle, _ = _longest_path_oracle(len(duration), resource, duration, deps)
    assert oracle is not None
    # tasks start as early as possible, so every start is its longest path and the makespan the critical path
    assert tl.start == pytest.approx(oracle, rel=1e-12, abs=1e-12)
    critical = max((s + d for s, d in zip(oracle, duration)), default=0.0)
    assert tl.makespan == pytest.approx(critical, rel=1e-12, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(_dags(forward_refs=True))
def test_random_graphs_with_forward_deps_run_or_raise_cycle_error(dag):
    resource, duration, deps = dag
    oracle, _ = _longest_path_oracle(len(duration), resource, duration, deps)
    tasks = _build(resource, duration, deps)
    if oracle is None:
        with pytest.raises(CycleError):
            run(tasks)
        return
    tl = run(tasks)
    _check_timeline(tl, resource, duration, deps)
    assert tl.start == pytest.approx(oracle, rel=1e-12, abs=1e-12)


@settings(max_examples=20, deadline=None)
@given(_dags())
def test_random_dags_are_deterministic(dag):
    a, b = run(_build(*dag)), run(_build(*dag))
    assert a.start == b.start and a.end == b.end


@settings(max_examples=40, deadline=None)
@given(_dags(forward_refs=True), st.randoms(use_true_random=False))
def test_a_plan_serves_every_duration_of_its_graph(dag, rnd):
    # workload builds one graph per shape and its plan once, then runs it with each plan's durations
    resource, duration, deps = dag
    tasks = _build(resource, duration, deps)
    try:
        plan = plan_of(tasks)
    except CycleError:
        return
    other = [rnd.choice([0.0, 1.0, rnd.uniform(0.0, 10.0)]) for _ in duration]
    fresh = run(_build(resource, other, deps))
    reused = run(tasks.with_durations(other), plan)
    assert reused.start == fresh.start and reused.end == fresh.end


# ------------------------------------------------------------------------------------------- critical path, slack


def test_critical_path_of_a_fork_takes_the_longer_branch_and_the_other_has_slack():
    t = Tasks()
    a, b, c = t.stream("a"), t.stream("b"), t.stream("c")
    x = t.add(a, 1.0)
    slow = t.add(b, 5.0, (x,))
    fast = t.add(c, 2.0, (x,))
    join = t.add(a, 1.0, (slow, fast))
    tl = run(t, why=True)
    assert critical_path(tl) == [x, slow, join]
    assert slack(tl, plan_of(t)) == [0.0, 0.0, 3.0, 0.0]


def test_stream_order_is_a_cause_and_ties_go_to_the_stream():
    t = Tasks()
    a, b = t.stream("a"), t.stream("b")
    x = t.add(a, 2.0)
    y = t.add(b, 2.0)
    z = t.add(a, 1.0, (y,))                            # its stream (x) and its dependency (y) both end at 2
    tl = run(t, why=True)
    assert tl.cause == [-1, -1, x] and critical_path(tl) == [x, z]


def test_critical_path_needs_the_causes():
    t = Tasks()
    t.add(t.stream("a"), 1.0)
    with pytest.raises(ValueError, match="why=True"):
        critical_path(run(t))
    assert critical_path(run(Tasks(), why=True)) == []


@settings(max_examples=60, deadline=None)
@given(_dags())
def test_critical_path_is_a_gapless_chain_of_edges_as_long_as_the_step(dag):
    # critical path method (Kelley & Walker 1959): a chain of predecessor edges, each task starting as its cause
    # ends, from time 0 to the makespan; every task's float is ≥ 0 and 0 along the chain
    resource, duration, deps = dag
    tasks = _build(resource, duration, deps)
    plan = plan_of(tasks)
    tl = run(tasks, plan, why=True)
    plain = run(tasks, plan)
    assert tl.start == plain.start and tl.end == plain.end
    chain = critical_path(tl)
    if not duration:
        return
    assert tl.start[chain[0]] == 0.0 and tl.end[chain[-1]] == tl.makespan
    for a, b in zip(chain, chain[1:]):
        assert a in deps[b] or plan.prev[b] == a
        assert tl.end[a] == tl.start[b]
    assert sum(duration[i] for i in chain) == pytest.approx(tl.makespan, rel=1e-9, abs=1e-9)
    floats = slack(tl, plan)
    assert min(floats) >= -1e-9
    assert all(abs(floats[i]) <= 1e-9 for i in chain)
