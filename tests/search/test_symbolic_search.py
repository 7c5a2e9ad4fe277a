"""Searching by the symbolic cost: Kendall's τ and top-k overlap, the pre-filter, the symbolic search, the CLI."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from autoplan.cli import main
from autoplan.families.symbolic import symbolic_cost
from autoplan.search.exhaustive import search
from autoplan.search.space import enumerate_plans, load_space
from autoplan.search.symbolic import kendall_tau, prefilter, symbolic_order, symbolic_search, top_overlap
from autoplan.specs.cluster import load_cluster
from autoplan.specs.model import ModelSpec

TINY = ModelSpec(name="tiny-gpt", layers=8, hidden=256, heads=8, ffn_hidden=1024, vocab=1024, seq_len=256)


def _tau_by_pairs(x: list[float], y: list[float]) -> float:
    """Kendall's τ-b straight from its definition, pair by pair (the oracle)."""
    sign = lambda v: (v > 0) - (v < 0)  # noqa: E731
    pairs = list(itertools.combinations(range(len(x)), 2))
    net = sum(sign(x[j] - x[i]) * sign(y[j] - y[i]) for i, j in pairs)
    tied_x = sum(x[i] == x[j] for i, j in pairs)
    tied_y = sum(y[i] == y[j] for i, j in pairs)
    return net / math.sqrt((len(pairs) - tied_x) * (len(pairs) - tied_y))


def test_tau_of_the_same_and_the_reversed_order():
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0


def test_tau_b_with_ties():
    # one tied pair in x, two concordant pairs: 2 / sqrt(2·3) (Kendall 1945, τ_b)
    assert kendall_tau([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / math.sqrt(6))
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=2, max_size=12))
def test_tau_agrees_with_its_definition(pairs):
    x, y = [p[0] for p in pairs], [p[1] for p in pairs]
    expected = math.nan if len(set(x)) < 2 or len(set(y)) < 2 else _tau_by_pairs(x, y)
    got = kendall_tau(x, y)
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected, abs=1e-12)


def test_tau_refuses_unequal_lengths():
    with pytest.raises(ValueError):
        kendall_tau([1, 2], [1, 2, 3])


def test_top_overlap():
    assert top_overlap([1, 2, 3, 4, 5], [1, 2, 3, 4, 5], 3) == 3
    assert top_overlap([1, 2, 3, 4, 5], [5, 4, 3, 2, 1], 2) == 0
    assert top_overlap([1, 2, 3, 4, 5], [2, 1, 9, 8, 3], 3) == 2


@pytest.fixture(scope="module")
def small_case():
    cluster = load_cluster("dgx-h100-80g", 8)
    plans, _ = enumerate_plans(TINY, 8, load_space("default"), 64)
    return TINY, cluster, plans


def test_symbolic_order_is_sorted_and_holds_only_plans_that_fit(small_case):
    model, cluster, plans = small_case
    order, _ = symbolic_order(model, cluster, plans)
    scores = [x for x, _ in order]
    assert scores == sorted(scores) and len(order) > 10
    assert all(symbolic_cost(model, cluster, s, "balance") == x for x, s in order[:5])


def test_prefilter_keeps_the_simulators_best_on_a_small_case(small_case):
    model, cluster, plans = small_case
    best = search(model, cluster, plans, top_k=1).leaderboard[0]
    kept = prefilter(model, cluster, plans, 10)
    assert len(kept) < len(plans) / 5
    assert best.strategy in kept
    assert search(model, cluster, kept, top_k=1).leaderboard[0].strategy == best.strategy


def test_prefilter_keeps_at_least_what_it_is_asked_to(small_case):
    model, cluster, plans = small_case
    assert len(prefilter(model, cluster, plans, 1e-6, keep_at_least=7)) == 7


def test_symbolic_search_simulates_only_its_top_k_in_symbolic_order(small_case):
    model, cluster, plans = small_case
    result = symbolic_search(model, cluster, plans, top_k=5)
    order, _ = symbolic_order(model, cluster, plans)
    assert [e.strategy for e in result.leaderboard] == [s for _, s in order[:5]]
    assert len(result.evaluations) == 5 and all(e.metrics.step_time > 0 for e in result.leaderboard)
    assert result.pruned == len(order) - 5 and result.sampler == "symbolic"


def test_cli_search_by_symbolic_cost(tmp_path):
    r = CliRunner().invoke(main, ["search", "--model", "llama3-8b", "--gpus", "16", "--global-batch", "64", "--top",
                                  "3", "--out", str(tmp_path), "--cost", "symbolic", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert len(out["leaderboard"]) == 3
    inputs = json.loads((tmp_path / out["run"] / "inputs.json").read_text())
    assert inputs["cost"] == "symbolic" and inputs["sampler"] == "symbolic"


def test_cli_prefilter_and_symbolic_cost_together_are_refused(tmp_path):
    r = CliRunner().invoke(main, ["search", "--model", "llama3-8b", "--gpus", "16", "--out", str(tmp_path),
                                  "--cost", "symbolic", "--prefilter", "10"])
    assert r.exit_code == 2 and "--prefilter" in r.output and "Traceback" not in r.output


def test_run_search_with_a_prefilter_counts_the_whole_space(small_case, tmp_path):
    from autoplan.search.run import run_search

    model, cluster, plans = small_case
    (tmp_path / "run").mkdir()
    result = run_search(model, cluster, plans, tmp_path / "run", top_k=3, workers=0, sampler="exhaustive",
                        prefilter=10)
    order, out_of_memory = symbolic_order(model, cluster, plans)
    assert result.valid == len(plans) and result.out_of_memory == out_of_memory
    assert result.prefiltered + result.widened == len(order) - math.ceil(len(order) / 10)
    assert len(result.evaluations) + result.pruned + result.prefiltered == len(order)


def test_a_prefiltered_search_widens_to_the_exact_top_k(small_case, tmp_path):
    # whatever the pre-filter keeps, the dropped plans whose bound could beat its top k are searched too: the
    # leaderboard is the exhaustive search's
    from autoplan.search.exhaustive import search
    from autoplan.search.run import run_search

    model, cluster, plans = small_case
    exact = search(model, cluster, plans, top_k=3)
    for percent in (0.1, 1, 10):
        folder = tmp_path / f"run{percent}"
        folder.mkdir()
        got = run_search(model, cluster, plans, folder, top_k=3, workers=0, sampler="exhaustive", prefilter=percent)
        assert [e.strategy for e in got.leaderboard] == [e.strategy for e in exact.leaderboard]
        assert len({e.strategy for e in got.evaluations}) == len(got.evaluations)


def test_run_search_by_symbolic_cost_keeps_its_order(small_case, tmp_path):
    from autoplan.search.run import run_search

    model, cluster, plans = small_case
    (tmp_path / "run").mkdir()
    result = run_search(model, cluster, plans, tmp_path / "run", top_k=4, workers=0, cost="symbolic")
    order, _ = symbolic_order(model, cluster, plans)
    assert [e.strategy for e in result.leaderboard] == [s for _, s in order[:4]]
