"""The bound-pruned exhaustive search returns exactly the top k of simulating every plan."""

from hypothesis import given, settings, strategies as st

from autoplan.families.registry import lower_bound
from autoplan.search.exhaustive import rank_key, search
from autoplan.search.run import choose_sampler
from autoplan.search.space import enumerate_plans, load_space
from autoplan.sim.simulate import evaluate
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster


def _full_ranking(model, cluster, plans):
    evals = [evaluate(model, cluster, p) for p in plans]
    return sorted((e for e in evals if e.feasible), key=rank_key)


def test_pruned_leaderboard_equals_full_ranking():
    model, cluster = get_model("gpt-7.5b"), load_cluster("dgx-a100-80g", 32)
    plans, _ = enumerate_plans(model, 32, load_space(fixed={"cp": 1, "zero": 1}), 128)
    result = search(model, cluster, plans, top_k=5)
    full = _full_ranking(model, cluster, plans)
    assert [e.strategy for e in result.leaderboard] == [e.strategy for e in full[:5]]
    assert result.pruned > 0
    assert len(result.evaluations) + result.pruned + result.out_of_memory + result.equivalent == result.valid


def test_a_budget_that_runs_out_stops_the_search_and_counts_what_could_still_enter():
    model, cluster = get_model("gpt-7.5b"), load_cluster("dgx-a100-80g", 32)
    plans, _ = enumerate_plans(model, 32, load_space(fixed={"cp": 1, "zero": 1}), 128)
    whole = search(model, cluster, plans, top_k=5)
    assert whole.unproven == 0
    assert search(model, cluster, plans, top_k=5, budget=len(whole.evaluations)).leaderboard == whole.leaderboard
    # fewer simulations than the top holds: whatever the step times, the rest could still enter
    short = 4
    cut = search(model, cluster, plans, top_k=5, budget=short)
    assert len(cut.evaluations) == short < len(whole.evaluations)
    assert cut.unproven > 0 and cut.pruned == whole.pruned + len(whole.evaluations) - len(cut.evaluations)
    # the best of what it simulated, in rank order
    assert cut.leaderboard == sorted((e for e in cut.evaluations if e.feasible), key=rank_key)[:5]


def test_auto_is_the_exhaustive_search_at_any_size_and_a_sampler_asked_for_is_kept():
    assert choose_sampler("auto", 10**6, 20000) == "exhaustive"
    assert choose_sampler("tpe", 10**6, 20000) == "tpe"
    assert choose_sampler("tpe", 100, 20000) == "exhaustive"          # the budget covers every plan


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["gpt-1.7b", "gpt-7.5b", "llama3-8b"]), st.sampled_from([8, 16, 32]))
def test_bound_never_exceeds_step_time(name, gpus):
    model, cluster = get_model(name), load_cluster("dgx-h100-80g", gpus)
    plans, _ = enumerate_plans(model, gpus, load_space(fixed={"micro_batch": 1}), 64)
    for p in plans[:: max(1, len(plans) // 12)]:
        e = evaluate(model, cluster, p)
        if e.feasible:
            assert lower_bound(model, cluster, p) <= e.metrics.step_time * (1 + 1e-9)


def test_search_is_deterministic():
    model, cluster = get_model("gpt-1.7b"), load_cluster("dgx-a100-80g", 16)
    plans, _ = enumerate_plans(model, 16, load_space(), 64)
    a = search(model, cluster, plans, top_k=8)
    b = search(model, cluster, list(reversed(plans)), top_k=8)
    assert [e.strategy for e in a.leaderboard] == [e.strategy for e in b.leaderboard]


# ------------------------------------------------------------------------------- a failing trial ends nothing

def _raising_for(monkeypatch, bad):
    """Make ``evaluate`` raise for the plans ``bad`` picks (as a simulator bug would)."""
    import autoplan.search.executors as ex

    real = ex.evaluate

    def flaky(model, cluster, s):
        if bad(s):
            raise ZeroDivisionError("boom\nsecond line")
        return real(model, cluster, s)

    monkeypatch.setattr(ex, "evaluate", flaky)


def test_an_exception_in_one_trial_is_recorded_against_it_and_the_search_goes_on(monkeypatch):
    model, cluster = get_model("gpt-1.7b"), load_cluster("dgx-a100-80g", 16)
    plans, _ = enumerate_plans(model, 16, load_space(), 64)
    clean = search(model, cluster, plans, top_k=5)
    winner = clean.leaderboard[0].strategy
    _raising_for(monkeypatch, lambda s: s == winner)
    seen = []
    result = search(model, cluster, plans, top_k=5, on_result=seen.append)
    broken = [e for e in result.evaluations if e.strategy == winner]
    assert len(broken) == 1 and broken[0].metrics is None and not broken[0].feasible
    assert broken[0].violations == ("simulator error: ZeroDivisionError: boom",)
    assert broken[0] in seen
    full = [e for e in _full_ranking(model, cluster, plans) if e.strategy != winner]
    assert [e.strategy for e in result.leaderboard] == [e.strategy for e in full[:5]]


def test_a_failing_bound_or_memory_model_still_evaluates_the_plan(monkeypatch):
    import autoplan.search.exhaustive as exh

    model, cluster = get_model("gpt-1.7b"), load_cluster("dgx-a100-80g", 16)
    plans, _ = enumerate_plans(model, 16, load_space(fixed={"cp": 1, "zero": 1}), 64)
    clean = search(model, cluster, plans, top_k=5)
    winner = clean.leaderboard[0].strategy
    real_bound, real_peak = exh.lower_bound, exh.peak_memory

    def bound(m, c, s):
        if s == winner:
            raise ValueError("no bound")
        return real_bound(m, c, s)

    def peak(m, c, s):
        if s == winner:
            raise ValueError("no memory model")
        return real_peak(m, c, s)

    monkeypatch.setattr(exh, "lower_bound", bound)
    monkeypatch.setattr(exh, "peak_memory", peak)
    result = search(model, cluster, plans, top_k=5)
    assert [e.strategy for e in result.leaderboard] == [e.strategy for e in clean.leaderboard]
    assert result.evaluations[0].strategy == winner       # bound 0: simulated first


def test_a_failing_trial_under_a_sampler_is_recorded_too(tmp_path, monkeypatch):
    import json

    from autoplan.search.run import run_search

    model, cluster = get_model("gpt-1.7b"), load_cluster("dgx-a100-80g", 16)
    plans, _ = enumerate_plans(model, 16, load_space(fixed={"cp": 1}), 64)
    _raising_for(monkeypatch, lambda s: s.tp == 2)
    result = run_search(model, cluster, plans, tmp_path, sampler="random", budget=60, seed=3, top_k=5, workers=0)
    records = [json.loads(line) for line in (tmp_path / "evaluations.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["plan"].startswith("tp2 ")]
    assert failed and all(r["violations"] == ["simulator error: ZeroDivisionError: boom"] for r in failed)
    assert len(records) == 60 and result.leaderboard and all(e.strategy.tp != 2 for e in result.leaderboard)


def test_equal_bounds_are_put_in_label_order_where_the_search_reaches_them():
    """The search orders a group of equal bounds by label only when it reaches it: group by group, the order is
    the plans sorted by (bound, label), equal pairs in enumeration order."""
    from autoplan.search.exhaustive import _by_bound, _ties_by_label

    model, cluster = get_model("gpt-1.7b"), load_cluster("dgx-a100-80g", 16)
    plans, _ = enumerate_plans(model, 16, load_space(fixed={"cp": 1}), 64)
    order, _ = _by_bound(model, cluster, plans)
    want = sorted(order, key=lambda x: (x[0], x[1].short()))
    assert sum(a[0] == b[0] for a, b in zip(order, order[1:])) > 100          # ties, many of them
    start = 0
    while start < len(order):
        start = _ties_by_label(order, start)
    assert [s for _, s in order] == [s for _, s in want]


def test_ordering_by_the_cheap_bound_simulates_the_plans_the_familys_bound_would(monkeypatch):
    # the cheap bound only decides when the dearer bounds are asked: the same top k from the same simulated plans
    import autoplan.search.exhaustive as exhaustive

    for name, gpus, space, batch in (("gpt-7.5b", 32, "default", 128), ("mixtral-8x7b", 32, "moe", 128)):
        model, cluster = get_model(name), load_cluster("dgx-h100-80g", gpus)
        plans, _ = enumerate_plans(model, gpus, load_space(space, {"cp": 1}), batch)
        quick = search(model, cluster, plans, top_k=5)
        with monkeypatch.context() as m:
            m.setattr(exhaustive, "quick_bound", lambda model: None)
            plain = search(model, cluster, plans, top_k=5)
        assert [e.strategy for e in quick.leaderboard] == [e.strategy for e in plain.leaderboard]
        assert {e.strategy for e in quick.evaluations} == {e.strategy for e in plain.evaluations}
        assert quick.pruned == plain.pruned > 0
