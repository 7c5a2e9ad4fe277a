"""Run totals: a budget's steps, days, GPU-hours, energy and cost against closed forms."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoplan.errors import SpecError
from autoplan.families.strategy import Strategy
from autoplan.search.totals import Budget, Costing, busy_share, gpu_power_w, parse_amount, run_totals, short_amount
from autoplan.sim.simulate import evaluate


@pytest.mark.parametrize("text, value", [("15T", 15e12), ("300B", 3e11), ("2.5e12", 2.5e12), ("$50M", 5e7),
                                         ("16_384", 16384), ("1,000", 1000), ("4.2b", 4.2e9), (7, 7.0)])
def test_amounts_read_with_their_suffix(text, value):
    assert parse_amount(text, "--tokens") == pytest.approx(value)


@pytest.mark.parametrize("text", ["abc", "0", "-5", "15X", "nan", "", "1e400"])
def test_a_bad_amount_is_a_spec_error_naming_the_flag(text):
    with pytest.raises(SpecError, match="--tokens"):
        parse_amount(text, "--tokens")


def test_short_amounts():
    assert [short_amount(x) for x in (15e12, 3e11, 2.5e6, 12.0)] == ["15T", "300B", "2.5M", "12"]


@pytest.fixture(scope="module")
def plan(tiny_gpt, a100_8):
    e = evaluate(tiny_gpt, a100_8, Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=16))
    assert e.feasible
    return e


def _cluster(a100_8, tdp=400.0, idle=50.0, overhead=3200.0, pue=1.25, price=2.0):
    return replace(a100_8, gpu=replace(a100_8.gpu, tdp_w=tdp, idle_w=idle), node_overhead_w=overhead, pue=pue,
                   gpu_hour_usd=price)


def test_totals_match_the_closed_form(tiny_gpt, a100_8, plan):
    cluster = _cluster(a100_8)
    tokens = 1e9
    t = run_totals(tiny_gpt, cluster, plan, Budget(tokens=tokens))
    per_step = 16 * tiny_gpt.seq_len
    assert t.steps == math.ceil(tokens / per_step)
    assert t.tokens == t.steps * per_step
    assert t.train_s == pytest.approx(t.steps * plan.metrics.step_time)
    assert t.wall_s == t.train_s and t.days == pytest.approx(t.train_s / 86400)
    assert t.gpu_hours == pytest.approx(8 * t.wall_s / 3600)
    busy = busy_share(plan.metrics)
    watts = (50 + 350 * busy + 3200 / 8) * 1.25          # idle + (TDP - idle)·busy, node share, PUE
    assert t.energy_kwh == pytest.approx(8 * watts * t.train_s / 3.6e6)
    assert t.cost_usd == pytest.approx(t.gpu_hours * 2.0)


def test_goodput_stretches_the_run_and_counts_lost_time_at_idle(tiny_gpt, a100_8, plan):
    cluster = _cluster(a100_8)
    full = run_totals(tiny_gpt, cluster, plan, Budget(tokens=1e9))
    lossy = run_totals(tiny_gpt, cluster, plan, Budget(tokens=1e9, goodput=0.8))
    assert lossy.wall_s == pytest.approx(full.wall_s / 0.8)
    assert lossy.gpu_hours == pytest.approx(full.gpu_hours / 0.8)
    idle_watts = (50 + 3200 / 8) * 1.25
    assert lossy.energy_kwh - full.energy_kwh == pytest.approx(8 * idle_watts * (lossy.wall_s - full.wall_s) / 3.6e6)


def test_steps_price_flag_and_missing_power(tiny_gpt, a100_8, plan):
    t = run_totals(tiny_gpt, _cluster(a100_8, tdp=0.0, price=0.0), plan, Budget(steps=100, gpu_hour_usd=4.0))
    assert t.steps == 100 and t.energy_kwh is None and t.power_kw is None
    assert t.cost_usd == pytest.approx(t.gpu_hours * 4.0)
    assert run_totals(tiny_gpt, _cluster(a100_8, price=0.0), plan, Budget(steps=1)).cost_usd is None


def test_power_without_an_idle_figure_is_tdp_throughout(a100_8):
    cluster = _cluster(a100_8, idle=0.0, overhead=0.0, pue=1.0)
    assert gpu_power_w(cluster, 0.0) == gpu_power_w(cluster, 1.0) == 400.0
    assert gpu_power_w(_cluster(a100_8, tdp=0.0), 1.0) is None
    with pytest.raises(SpecError, match="idle_w 500 must be below tdp_w 400"):
        gpu_power_w(_cluster(a100_8, idle=500.0), 1.0)


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_power_grows_with_the_busy_share_between_idle_and_tdp(a100_8, low, high):
    cluster = _cluster(a100_8, overhead=0.0, pue=1.0)
    low, high = sorted((low, high))
    assert 50.0 <= gpu_power_w(cluster, low) <= gpu_power_w(cluster, high) <= 400.0


def test_a_ramp_at_the_plans_own_batch_changes_nothing_and_an_impossible_one_is_refused(tiny_gpt, a100_8, plan):
    cluster = _cluster(a100_8)
    plain = run_totals(tiny_gpt, cluster, plan, Budget(tokens=1e8))
    same = run_totals(tiny_gpt, cluster, plan, Budget(tokens=1e8, ramp=((5e7, 16),)))
    assert same.train_s == pytest.approx(plain.train_s, rel=1e-6)
    smaller = run_totals(tiny_gpt, cluster, plan, Budget(tokens=1e8, ramp=((5e7, 8),)))
    assert smaller.tokens >= 1e8 and smaller.steps > plain.steps
    with pytest.raises(SpecError, match="cannot run a global batch of 5"):
        run_totals(tiny_gpt, cluster, plan, Budget(tokens=1e8, ramp=((5e7, 5),)))


@pytest.mark.parametrize("kw, needle", [({"tokens": 1.0, "steps": 2}, "not both"), ({}, "not both"),
                                        ({"tokens": 1.0, "goodput": 0.0}, "goodput"),
                                        ({"tokens": 1.0, "ramp": ((2.0, 4), (1.0, 8))}, "rising"),
                                        ({"steps": 5, "ramp": ((2.0, 4),)}, "token budget")])
def test_bad_budgets(kw, needle):
    with pytest.raises(SpecError, match=needle):
        Budget(**kw)


def test_budget_round_trips_and_a_bad_record_is_one_line():
    b = Budget(tokens=15e12, gpu_hour_usd=2.5, goodput=0.9, ramp=((2.87e12, 1024),))
    assert Budget.from_dict(b.to_dict(), "x") == b
    with pytest.raises(SpecError, match="run_budget"):
        Budget.from_dict({"tokens": "many"}, "inputs.json")
    with pytest.raises(SpecError, match="run_budget"):
        Budget.from_dict([1, 2], "inputs.json")


def test_costing_describes_its_sources(tiny_gpt, a100_8, plan):
    c = Costing(tiny_gpt, _cluster(a100_8), Budget(tokens=1e9, goodput=0.9))
    text = c.describe()
    assert "1B tokens" in text and "goodput 90 %" in text and "PUE 1.25" in text and "$2 per GPU-hour" in text
    assert c(plan) is c(plan)


def test_a_plan_that_cannot_run_the_ramp_has_no_totals_and_a_reason(tiny_gpt, a100_8, plan):
    c = Costing(tiny_gpt, _cluster(a100_8), Budget(tokens=1e8, ramp=((5e7, 5),)))
    assert c(plan) is None and "global batch of 5" in c.why[plan.strategy]
