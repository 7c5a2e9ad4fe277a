"""What-ifs: the --vary syntax, clusters changed through ClusterSpec.scaled, the best plan under a change (never
worse than the baseline plan under it) and elasticities against what they must be."""

from __future__ import annotations

import pytest

from autoplan.errors import SpecError
from autoplan.families.strategy import Strategy
from autoplan.search.space import load_space
from autoplan.search.whatif import (Change, answer, apply, baseline_of_space, elasticities, label, parse_changes,
                                    rescaled)
from autoplan.sim.simulate import evaluate


def test_vary_syntax_factors_values_aliases_and_scenarios():
    got = parse_changes("nic_bw=2x, spine=4:1 ,hbm=x1.5+compute=2X,nvlink_domain=72,gpus=2048")
    assert got == [(Change("nic_bw", 2.0),), (Change("oversubscription", 4.0),),
                   (Change("hbm", 1.5), Change("compute", 2.0)), (Change("nvlink_domain", 72.0),),
                   (Change("gpus", 2048.0),)]
    assert [label(s) for s in got] == ["nic_bw=2x", "oversubscription=4:1", "hbm=1.5x+compute=2x", "nvlink_domain=72",
                                       "gpus=2048"]


@pytest.mark.parametrize("text, match", [
    ("nic_bw=2", "changes by a factor; write nic_bw=2x"), ("gpus=2x", "takes a value"),
    ("bogus=2x", "give one of compute=Nx"), ("nic_bw=-1x", "positive"), ("nic_bw=fast", "not a number"),
    ("gpus=1.5", "whole number"), (" , ", "names no change")])
def test_bad_vary_names_what_and_what_is_allowed(text, match):
    with pytest.raises(SpecError, match=match):
        parse_changes(text)


def test_changes_apply_through_the_checked_cluster_spec(a100_64):
    c = apply(a100_64, (Change("nic_bw", 2.0), Change("nic_bw", 1.5), Change("oversubscription", 2.0)))
    assert c.tiers[1].bandwidth == 3 * a100_64.tiers[1].bandwidth and c.tiers[-1].oversubscription == 2.0
    with pytest.raises(SpecError, match="must be a whole number of nodes"):
        apply(a100_64, (Change("nvlink_domain", 12.0),))
    s = Strategy(tp=2, pp=2, dp=16, global_batch=64)
    assert rescaled(s, 128).dp == 32 and rescaled(s, 6) is None


@pytest.fixture(scope="module")
def small(a100_64):
    from autoplan.families.catalog import get_model

    space = load_space("default", {"tp": 2, "micro_batch": 1, "recompute": "full", "schedule": "1f1b", "cp": 1,
                                   "sequence_parallel": False})
    return baseline_of_space(get_model("gpt-1.7b"), a100_64, space, 128)


def test_the_best_plan_under_a_change_beats_the_baseline_plan_under_it(small):
    out = answer(small, parse_changes("nic_bw=2x,oversubscription=4,compute=2x"), elasticity=False)
    step = small.best.metrics.step_time
    for row in out["whatifs"]:
        assert row["best"]["step_time_s"] <= row["baseline_plan"]["step_time_s"] * (1 + 1e-12)
    faster, spine, compute = (row["baseline_plan"]["step_time_s"] for row in out["whatifs"])
    assert faster <= step and spine >= step * (1 - 1e-12) and compute < step
    assert out["baseline"]["plan"] == small.best.strategy.short() and "elasticity" not in out


def test_elasticities_of_a_one_node_plan_ignore_the_nics(a100_8, tiny_gpt):
    # one node: no transfer leaves it, so NIC bandwidth cannot matter; compute and HBM bandwidth together carry
    # the kernel time (kernel overheads do not scale): between -1 and 0 together
    best = evaluate(tiny_gpt, a100_8.with_gpus(8), Strategy(dp=8, global_batch=8))
    got = {x.name: x.value for x in elasticities(tiny_gpt, a100_8, best)}
    assert got["nic_bw"] == pytest.approx(0.0, abs=1e-9) and got["memory"] == 0.0
    assert -1.0 - 1e-9 <= got["compute"] + got["hbm"] < 0 and got["compute"] < 0 and got["hbm"] < 0
    assert got["latency"] >= -1e-12


def test_more_memory_can_only_help_and_names_the_plan_that_needs_it(small):
    plans = small.plans_for(small.cluster.gpus)
    (mem,) = [x for x in elasticities(small.model, small.cluster, small.best, plans) if x.name == "memory"]
    assert mem.value <= 0 and mem.higher <= small.best.metrics.step_time
    assert (mem.plan == "") == (mem.value == 0)


@pytest.mark.parametrize("name, spec, gpus, batch", [("gpt-1.7b", "dgx-a100-80g", 64, 512),
                                                     ("mixtral-8x7b", "dgx-h100-80g", 64, 512),
                                                     ("resnet50", "dgx-a100-80g", 16, 512),
                                                     ("dlrm-criteo", "dgx-a100-80g", 8, 65536)])
def test_hbm_capacity_decides_whether_a_plan_fits_never_its_step(name, spec, gpus, batch):
    # the memory elasticity (whatif._more_memory) reuses the best plan's step under more HBM
    from autoplan.families.catalog import get_model
    from autoplan.families.registry import default_space
    from autoplan.search.space import enumerate_plans
    from autoplan.specs import load_cluster

    model, cluster = get_model(name), load_cluster(spec, gpus)
    plans = enumerate_plans(model, gpus, load_space(default_space(model), {}), batch)[0]
    bigger = cluster.scaled(memory=4.0)
    compared = 0
    for s in plans[:: max(1, len(plans) // 12)]:
        a, b = evaluate(model, cluster, s), evaluate(model, bigger, s)
        if a.feasible:
            assert b.feasible and b.metrics.step_time == a.metrics.step_time
            assert b.metrics.stage_breakdown == a.metrics.stage_breakdown
            compared += 1
    assert compared >= 3
