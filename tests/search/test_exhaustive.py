"""The bound-pruned exhaustive search returns exactly the top k of simulating every plan."""

from hypothesis import given, settings, strategies as st

from autoplan.search.exhaustive import lower_bound, rank_key, search
from autoplan.search.space import enumerate_plans, load_space
from autoplan.sim.simulate import evaluate
from autoplan.specs import get_model, load_cluster


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
