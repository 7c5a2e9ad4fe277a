"""The sweep over GPU counts: which counts, exactness per count, efficiency and the choice under a deadline and a
budget (cases with a known answer)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from autoplan.errors import SpecError
from autoplan.search.exhaustive import search
from autoplan.search.space import Space, enumerate_plans
from autoplan.search.sweep import Point, Sweep, choose, curve, natural_counts, parse_counts, run_sweep
from autoplan.search.totals import Budget, RunTotals
from autoplan.specs.cluster import load_cluster


def test_counts_are_powers_of_two_and_the_clusters_natural_sizes():
    h100 = load_cluster("dgx-h100-80g")
    assert parse_counts("1024..16384", h100) == [1024, 2048, 4096, 8192, 16384]
    assert natural_counts(h100, 8, 40) == [8, 16, 32]
    nvl72 = load_cluster("gb200-nvl72")
    counts = parse_counts("1024..16384", nvl72)
    assert {1152, 2304, 4608, 9216} <= set(counts) and {1024, 16384} <= set(counts)   # racks of 72 and SUs of 576
    assert all(n % nvl72.gpus_per_node == 0 for n in counts)
    assert parse_counts("64, 32,64", h100) == [32, 64]


@pytest.mark.parametrize("text, needle", [("16384..1024", "down"), ("abc", "whole number"), ("12", "whole"),
                                          ("3..5", "no count"), ("0..8", "positive")])
def test_bad_counts_are_one_line(text, needle):
    with pytest.raises(SpecError, match=needle):
        parse_counts(text, load_cluster("dgx-h100-80g"))


def test_each_count_gets_the_exact_best_plan_of_its_own_search(tiny_gpt, a100_8):
    space = Space({"tp": (1, 2, 4), "pp": (1, 2), "micro_batch": (1, 2), "zero": (0, 1),
                   "recompute": ("none", "full")})
    sweep = run_sweep(tiny_gpt, a100_8, [8, 16], space, 32, budget=Budget(tokens=1e9), top_k=2)
    for point in sweep.points:
        cluster = a100_8.with_gpus(point.gpus)
        plans, _ = enumerate_plans(tiny_gpt, point.gpus, space, 32)
        alone = search(tiny_gpt, cluster, plans, 2)
        assert [e.strategy for e in point.board] == [e.strategy for e in alone.leaderboard]
        assert point.totals.gpus == point.gpus and point.totals.steps == -(-1e9 // (32 * tiny_gpt.seq_len))
    assert sweep.efficiency()[8] == 1.0
    forked = run_sweep(tiny_gpt, a100_8, [8, 16], space, 32, budget=Budget(tokens=1e9), top_k=2, workers=2)
    assert [p.board for p in forked.points] == [p.board for p in sweep.points]
    assert forked.cpu_s > 0


def _point(gpus: int, tokens_per_s: float, days: float, usd: float | None) -> Point:
    best = SimpleNamespace(metrics=SimpleNamespace(tokens_per_s=tokens_per_s, mfu=0.4, step_time=16e6 / tokens_per_s),
                           strategy=SimpleNamespace(short=lambda: f"plan{gpus}"))
    totals = RunTotals(steps=1, tokens=1.0, train_s=days * 86400, wall_s=days * 86400, gpus=gpus,
                       gpu_hours=gpus * days * 24, energy_kwh=None, cost_usd=usd, power_kw=None,
                       gpu_hour_usd=2.0 if usd else 0.0, busy=0.8)
    return Point(gpus=gpus, board=(best,), totals=totals)


SWEEP = Sweep(points=(_point(1024, 1.0e6, 100.0, 7.0e6), _point(2048, 1.9e6, 52.0, 7.5e6),
                      _point(4096, 3.4e6, 29.0, 8.4e6), _point(8192, 5.4e6, 18.0, 10.6e6)))
"""Throughput per GPU falls with the count (efficiency 1, 0.95, 0.85, 0.675), so time falls and cost rises."""


def test_efficiency_and_the_first_count_below_the_threshold():
    eff = SWEEP.efficiency()
    assert [round(eff[g], 4) for g in (1024, 2048, 4096, 8192)] == [1.0, 0.95, 0.85, 0.675]
    assert SWEEP.first_below(0.9) == 4096 and SWEEP.first_below(0.5) is None
    c = curve(SWEEP, 0.8, gpu_hour_usd=2.0)
    assert c.first_below == 8192 and c.ideal == [1e6, 2e6, 4e6, 8e6]
    assert c.usd_per_mtok[0] == pytest.approx(1024 * 2.0 / 3600 / 1e6 * 1e6)


@pytest.mark.parametrize("deadline, budget, gpus", [
    (60.0, None, 2048),          # 2048 and more meet 60 days; 2048 is the cheapest of them
    (None, 9.0e6, 1024),         # the cheapest count overall
    (30.0, 9.0e6, 4096),         # 4096 and 8192 meet 30 days; only 4096 fits $9M
    (200.0, 2.0e7, 1024),
])
def test_the_cheapest_count_meeting_the_constraints(deadline, budget, gpus):
    c = choose(SWEEP, deadline, budget)
    assert c.point is not None and c.point.gpus == gpus and c.days_over == c.usd_over == 0.0


def test_which_constraint_cannot_be_met_and_by_how_much():
    late = choose(SWEEP, 10.0, None)
    assert late.point is None and late.days_over == pytest.approx(8.0)
    assert "8,192 GPUs" in late.message and "10-day deadline cannot be met" in late.message
    poor = choose(SWEEP, None, 5.0e6)
    assert poor.point is None and poor.usd_over == pytest.approx(2.0e6) and "1,024 GPUs" in poor.message
    neither = choose(SWEEP, 10.0, 5.0e6)
    assert neither.days_over == pytest.approx(8.0) and neither.usd_over == pytest.approx(2.0e6)
    assert "deadline cannot be met" in neither.message and "budget cannot be met" in neither.message
    both = choose(SWEEP, 20.0, 8.0e6)        # on time: only 8192 ($10.6M); affordable: 1024, 2048 (52 days at best)
    assert both.point is None and "no count meets both" in both.message
    assert both.usd_over == pytest.approx(2.6e6) and both.days_over == pytest.approx(32.0)


def test_a_budget_needs_a_price_and_a_count_that_runs():
    unpriced = Sweep(points=(_point(1024, 1e6, 100.0, None),))
    with pytest.raises(SpecError, match="price"):
        choose(unpriced, None, 1e6)
    assert choose(unpriced, 120.0, None).point.gpus == 1024        # without a price: the fewest GPU-hours
    with pytest.raises(SpecError, match="no GPU count"):
        choose(Sweep(points=(Point(gpus=8, board=()),)), 1.0, None)
