"""Collective policies of the DP gradient and parameter collectives: nccl is network.py unchanged, baseline stays
near it, Themis is never slower than the baseline, and the Strategy knob validates its choices."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.hardware import network, policy
from autoplan.families.transformer import step as plan
from autoplan.hardware.dims import dims_of_shape
from autoplan.errors import SpecError
from autoplan.specs.cluster import load_cluster
from autoplan.families.strategy import Strategy
from autoplan.sim.simulate import evaluate

H100 = load_cluster("dgx-h100-80g", 1024)
OPS = ("all_reduce", "reduce_scatter", "all_gather")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("size,step", [(2, 1), (8, 1), (16, 8), (64, 2), (1024, 1)])
def test_nccl_policy_is_network_unchanged(op, size, step):
    g = network.group_shape(H100.gpus_per_node, size, step)
    for nbytes in (1e3, 3e7, 2e9):
        assert policy.COLLECTIVES[op](H100, g, nbytes, "nccl") == network.COLLECTIVES[op](H100, g, nbytes)


@pytest.mark.parametrize("p", ["baseline", "themis"])
def test_groups_inside_a_node_keep_the_nccl_model(p):
    g = network.group_shape(H100.gpus_per_node, 8, 1)
    assert policy.all_reduce(H100, g, 1e9, p) == network.all_reduce(H100, g, 1e9)


def test_one_gpu_per_node_large_all_reduce_baseline_matches_nccl_bandwidth():
    """One member per node: one dimension, ring bandwidth 2(n-1)/n·S/B on both models, latencies differ slightly."""
    g = network.group_shape(H100.gpus_per_node, 128, 8)
    assert policy.all_reduce(H100, g, 2e9, "baseline") == pytest.approx(network.all_reduce(H100, g, 2e9), rel=0.01)


def test_dims_of_shape_are_members_per_node_times_nodes_at_calibrated_rates():
    g = network.group_shape(H100.gpus_per_node, 64, 2)        # 4 members per node on 16 nodes
    nvl, ib = dims_of_shape(H100, g, 1e12)
    assert (nvl.size, ib.size) == (4, 16)
    assert nvl.bandwidth == pytest.approx(H100.tiers[0].bandwidth * H100.tiers[0].efficiency, rel=1e-4)
    assert ib.bandwidth == pytest.approx(H100.tiers[1].bandwidth * H100.tiers[1].efficiency)


@settings(max_examples=40, deadline=None)
@given(per_node=st.sampled_from([1, 2, 4, 8]), nodes=st.integers(2, 128), op=st.sampled_from(OPS),
       nbytes=st.floats(1e4, 4e9))
def test_themis_never_slower_than_baseline_on_dp_groups(per_node, nodes, op, nbytes):
    g = network.GroupShape(size=per_node * nodes, per_node=per_node, nodes=nodes, span=8 * nodes)
    assert policy._time(H100, g, op, nbytes, "themis") <= policy._time(H100, g, op, nbytes, "baseline") * (1 + 1e-12)


def test_knob_validates_and_labels():
    with pytest.raises(SpecError, match="collective_policy 'ring' is not one of nccl, baseline, themis"):
        Strategy(collective_policy="ring")
    base = Strategy(tp=8, pp=8, dp=16)
    assert base.short() == replace(base, collective_policy="nccl").short()
    assert replace(base, collective_policy="themis").short().endswith(" themis")


def test_policy_leaves_tp_inside_a_node_alone_and_changes_only_the_dp_collectives(tiny_gpt, a100_64):
    s = Strategy(tp=2, pp=2, dp=16, global_batch=64, zero=1)
    base = plan.step_costs(tiny_gpt, a100_64, s)
    other = plan.step_costs(tiny_gpt, a100_64, replace(s, collective_policy="themis"))
    assert base.passes == other.passes and base.optimizer == other.optimizer and base.hop == other.hop
    assert evaluate(tiny_gpt, a100_64, replace(s, collective_policy="baseline")).feasible
