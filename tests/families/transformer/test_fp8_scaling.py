"""FP8 delayed scaling's amax reduction: one latency-bound all-reduce over a stage's TP×CP×DP ranks per chunk
pass (closed form), only under precision fp8, in the dense and MoE step costs."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.families.transformer import fp8_scaling, moe, step as plan
from autoplan.hardware import network
from autoplan.specs.cluster import load_cluster

H100 = load_cluster("dgx-h100-80g", 1024)
GPT3 = get_model("gpt3-175b")
PLAN = Strategy(tp=4, pp=8, dp=32, global_batch=1024, virtual_stages=6, sequence_parallel=True, zero=1,
                precision="fp8")


def test_the_amax_group_is_a_stages_tp_cp_dp_ranks():
    g = fp8_scaling.amax_group(H100, replace(PLAN, tp=4, cp=2, dp=16))
    # consecutive in Megatron's rank order (tp, cp, dp, pp): 128 ranks on 16 nodes of 8
    assert (g.size, g.per_node, g.nodes) == (128, 8, 16)


def test_one_reduction_is_the_all_reduce_latency_and_two_kernels():
    g = network.group_shape(H100.domain_gpus, 4 * 32, 1)
    nvl, ib = H100.tiers[0].latency, H100.tier_spanning(g.span).latency
    # NCCL's double binary tree beats the ring across 16 nodes: 2(k−1) NVLink steps + 2·log2(N) IB steps
    latency = 2 * 7 * nvl + 2 * 4 * ib
    assert network.all_reduce_latency(H100, g) == pytest.approx(latency)
    assert fp8_scaling.reduction_seconds(H100, PLAN) == pytest.approx(latency + 2 * H100.gpu.kernel_overhead)


@pytest.mark.parametrize("precision", ["bf16", "fp8-current", "fp8-blockwise"])
def test_other_precisions_reduce_nothing_per_pass(precision):
    assert fp8_scaling.reduction_seconds(H100, replace(PLAN, precision=precision)) == 0.0


def test_the_latency_alone_is_below_any_all_reduce():
    for size, step in ((8, 1), (64, 1), (32, 8)):
        g = network.group_shape(H100.domain_gpus, size, step)
        nbytes = 64e6
        tiny = network.all_reduce(H100, g, 1.0)
        assert network.all_reduce_latency(H100, g) < tiny <= network.all_reduce(H100, g, nbytes)


def _without_reduction(monkeypatch, costs, model, s):
    monkeypatch.setattr(fp8_scaling, "reduction_seconds", lambda cluster, plan_: 0.0)
    return costs(model, H100, s).passes


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_every_chunk_pass_gains_one_reduction_as_dp(monkeypatch, recompute):
    s = replace(PLAN, recompute=recompute)
    sync = fp8_scaling.reduction_seconds(H100, s)
    assert sync > 0
    with_sync = plan.step_costs(GPT3, H100, s).passes
    without = _without_reduction(monkeypatch, plan.step_costs, GPT3, s)
    assert set(with_sync) == set(without)
    for key, cost in with_sync.items():
        # forward and backward alike; a full recompute reuses the forward's scales: still one per pass
        assert cost.seconds == pytest.approx(without[key].seconds + sync)
        assert dict(cost.parts)["dp"] == pytest.approx(dict(without[key].parts).get("dp", 0.0) + sync)


def test_under_zero3_the_reduction_joins_the_gathers_dp_part(monkeypatch):
    s = Strategy(tp=8, pp=1, dp=128, global_batch=1024, zero=3, precision="fp8")
    sync = fp8_scaling.reduction_seconds(H100, s)
    with_sync = plan.step_costs(GPT3, H100, s).passes
    without = _without_reduction(monkeypatch, plan.step_costs, GPT3, s)
    for key, cost in with_sync.items():
        kinds = [k for k, _ in cost.parts]
        assert kinds.count("dp") == 1
        assert dict(cost.parts)["dp"] == pytest.approx(dict(without[key].parts)["dp"] + sync)


def test_moe_chunk_passes_gain_it_too(monkeypatch):
    model = get_model("mixtral-8x7b")
    s = Strategy(tp=2, pp=4, dp=16, ep=8, global_batch=512, sequence_parallel=True, zero=1, precision="fp8")
    sync = fp8_scaling.reduction_seconds(H100, s)
    assert sync > 0
    with_sync = moe.step_costs(model, H100, s).passes
    without = _without_reduction(monkeypatch, moe.step_costs, model, s)
    for key, cost in with_sync.items():
        assert cost.seconds == pytest.approx(without[key].seconds + sync)


@given(st.integers(0, 8), st.integers(0, 8))
def test_a_wider_data_parallel_group_never_reduces_faster(a, b):
    small, large = sorted((2 ** a, 2 ** b))
    assert (fp8_scaling.reduction_seconds(H100, replace(PLAN, dp=small))
            <= fp8_scaling.reduction_seconds(H100, replace(PLAN, dp=large)))
