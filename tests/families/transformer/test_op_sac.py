"""torchtitan's per-op selective activation checkpointing (``recompute op``) and PyTorch's cross entropy
(``loss_impl``): closed forms counted by hand from torchtitan @9dec370 (parallelize_llama.py ``_save_list``,
``_custom_policy``; train.py ``loss_fn``), and their place between no recompute and full recompute."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.families.catalog import get_model
from autoplan.families.registry import violations
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.layer import LayerCompute, layer_compute
from autoplan.families.transformer.memory import activation_bytes_per_layer, stage_memory
from autoplan.sim.simulate import evaluate
from autoplan.specs.cluster import load_cluster
from autoplan.specs.model import ModelSpec

H100 = load_cluster("dgx-h100-80g", 8)
LLAMA = replace(get_model("llama3-8b"), seq_len=8192)


def test_llama3_8b_layer_keeps_what_the_policy_saves():
    # per token, bf16 unless noted: block input 2h; mm 1 (wq) 2q, mm 3 (wv) 2kv, mm 5 (w1) 2f, mm 7 (w2) 2h; flash
    # attention output 2q and fp32 log-sum-exp 4 per head. The H200 probe (tools/probe_torchtitan_memory.py) kept
    # 63616.06 bytes per token and layer with flash attention
    h, q, kv, f, a = 4096, 4096, 1024, 14336, 32
    per_token = 2 * h + 2 * q + 2 * kv + 2 * f + 2 * h + 2 * q + 4 * a
    assert per_token == 63616
    s = Strategy(dp=8, micro_batch=2, global_batch=16, recompute="op")
    assert activation_bytes_per_layer(LLAMA, s, True) == pytest.approx(per_token * 2 * 8192, rel=1e-12)
    assert activation_bytes_per_layer(LLAMA, s, False) == activation_bytes_per_layer(LLAMA, s, True)


def test_tensor_parallel_keeps_partial_sums_and_reduce_scatter_outputs():
    # tp 8 with sequence parallelism: the column-parallel outputs and attention split over t, w2's output is the
    # full-width partial sum before its reduce-scatter, and both reduce-scatters' outputs are kept (2sbh/t each)
    t, sb = 8, 8192
    h, q, kv, f, a = 4096, 4096, 1024, 14336, 32
    hand = sb * (2 * h / t + (2 * q + 2 * kv + 2 * f) / t + 2 * h + (2 * q + 4 * a) / t + 2 * 2 * h / t)
    s = Strategy(tp=t, global_batch=1, sequence_parallel=True, recompute="op")
    assert activation_bytes_per_layer(LLAMA, s, True) == pytest.approx(hand, rel=1e-12)


def test_without_a_gate_the_odd_matmuls_are_wq_wv_w1():
    gelu = replace(LLAMA, activation="gelu", name="llama-gelu")
    assert [m[0] for m in gelu.layer_matmuls()[::2]] == ["wq", "wv", "w1"]
    sb, h, q, kv, f = 8192, 4096, 4096, 1024, 14336
    hand = sb * (2 * h + 2 * q + 2 * kv + 2 * f + 2 * q + 4 * 32)
    assert activation_bytes_per_layer(gelu, Strategy(global_batch=1, recompute="op"), True) == pytest.approx(hand)


def test_recompute_time_lies_between_none_and_full():
    lays = {r: layer_compute(LLAMA, H100, 2, 1, True, 2, r) for r in ("none", "op", "full")}
    secs = {r: LayerCompute.seconds(lay.recompute) for r, lay in lays.items()}
    assert secs["none"] == 0 < secs["op"] < secs["full"]
    # the GEMMs it runs again: wk, wo, w3 (mm 2, 4, 6), column-parallel ones split over t = 2
    tokens, h, kv, q, f = 2 * 8192, 4096, 1024, 4096, 14336
    gemm_flops = sum(op.flops for op in lays["op"].recompute)
    assert gemm_flops == pytest.approx(2 * tokens * (h * kv / 2 + q / 2 * h + h * f / 2), rel=1e-12)
    # the reduce-scatters' outputs are kept: only the all-gathers run again
    assert [c.kind for c in lays["op"].recompute_collectives] == ["all_gather", "all_gather"]
    none, op, full = (LLAMA.hardware_flops_per_token(r) for r in ("none", "op", "full"))
    assert none < op < full


@settings(max_examples=60, deadline=None)
@given(tp=st.sampled_from([1, 2, 4]), mb=st.integers(1, 4), cp=st.sampled_from([1, 2]),
       kv=st.sampled_from([8, 32]), gated=st.booleans(), sp=st.booleans())
def test_op_keeps_between_full_and_none(tp, mb, cp, kv, gated, sp):
    model = replace(LLAMA, kv_heads=kv, activation="swiglu" if gated else "gelu", seq_len=4096)
    s = Strategy(tp=tp, cp=cp, micro_batch=mb, global_batch=mb, sequence_parallel=sp and tp > 1)
    acts = {r: activation_bytes_per_layer(model, replace(s, recompute=r), True) for r in ("none", "op", "full")}
    assert acts["full"] < acts["op"] < acts["none"]


def test_an_op_plan_simulates_between_none_and_full():
    cluster = load_cluster("dgx-h100-80g", 8)
    steps = {r: evaluate(LLAMA, cluster, Strategy(dp=8, micro_batch=1, global_batch=8, zero=3, recompute=r))
             for r in ("none", "op", "full")}
    assert steps["none"].metrics.step_time < steps["op"].metrics.step_time < steps["full"].metrics.step_time
    assert Strategy(recompute="op").short() == "tp1 pp1 dp1 mb1 1f1b opsac"


def test_op_is_for_dense_models_without_biases():
    plan = Strategy(dp=8, global_batch=8, recompute="op")
    assert violations(LLAMA, 8, plan) == []
    gpt = ModelSpec(name="gpt", layers=8, hidden=256, heads=8, ffn_hidden=1024, vocab=1024, seq_len=256)
    assert any("recompute op" in r for r in violations(gpt, 8, plan))


@pytest.mark.parametrize("impl,per_logit", [("megatron", 4), ("torch", 12), ("torch-compiled", 4)])
def test_torch_loss_bytes_per_logit(impl, per_logit):
    # torch eager (probe: 12.0 bytes/logit at the backward's peak): log_softmax's fp32 output, nll_loss's input
    # gradient and log_softmax's input gradient; compiled (probe: 4.0): the bf16 logits and a bf16 gradient
    s = Strategy(tp=2, pp=2, dp=2, global_batch=16, loss_impl=impl)
    base = stage_memory(LLAMA, H100, replace(s, loss_impl="megatron", cross_entropy_fusion=True), 1).embedding
    logits = LLAMA.seq_len * s.micro_batch * LLAMA.vocab / s.tp
    assert stage_memory(LLAMA, H100, s, 1).embedding - base == pytest.approx((per_logit - 2) * logits)


def test_the_torch_loss_is_not_megatrons_fusion():
    bad = Strategy(dp=8, global_batch=8, loss_impl="torch", cross_entropy_fusion=True)
    assert any("loss_impl torch" in r for r in violations(LLAMA, 8, bad))
