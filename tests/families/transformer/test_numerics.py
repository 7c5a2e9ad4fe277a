"""Memory-saving numerics of DeepSeek-V3 as general knobs, against closed forms: AdamW moments in BF16
(``optimizer_moments``, §3.3.4) and the MLP activation's input stored in FP8 (``fp8_activation_store``, §3.3.3),
with their Megatron-LM arguments."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.hardware import compute

from autoplan.families.transformer import layer
from autoplan.families.transformer import moe_layer as moe
from autoplan.families.transformer import moe as fam
from autoplan.families.transformer import step
from autoplan.families.transformer.memory import activation_bytes_per_layer, memory_per_stage, optimizer_state_bytes
from autoplan.report.export import megatron_args
from autoplan.sim.simulate import evaluate
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy

SMALL = ModelSpec(name="small-moe", layers=8, hidden=512, heads=8, ffn_hidden=2048, vocab=1024, seq_len=512,
                  activation="swiglu", position="rope", norm="rmsnorm", bias=False, tied_embeddings=False,
                  dropout=False, experts=64, top_k=8, moe_ffn_hidden=256, shared_experts=1, dense_layers=1)
GPT = ModelSpec(name="tiny-gpt", layers=8, hidden=256, heads=8, ffn_hidden=1024, vocab=1000, seq_len=512)
A100 = load_cluster("dgx-a100-80g", 8)


@pytest.fixture(scope="module")
def h800():
    return load_cluster("dgx-h800-80g", 64)


# ------------------------------------------------------------------------------------- AdamW moments in BF16

def test_optimizer_state_is_the_fp32_master_and_two_moments():
    # Megatron-LM distributed optimizer: 4 + 4 + 4 bytes; DeepSeek-V3 §3.3.4: moments in BF16, master FP32
    assert optimizer_state_bytes(Strategy()) == 12
    assert optimizer_state_bytes(Strategy(optimizer_moments="bf16")) == 8


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
@pytest.mark.parametrize("schedule", ["1f1b", "dualpipe"])
def test_bf16_moments_shrink_only_the_optimizer_state_by_a_third(zero, schedule):
    kw = dict(pp=4, dp=2, global_batch=16, zero=zero, schedule=schedule)
    a = memory_per_stage(GPT, A100, Strategy(**kw))
    b = memory_per_stage(GPT, A100, Strategy(**kw, optimizer_moments="bf16"))
    for x, y in zip(a, b):
        assert y.optimizer == pytest.approx(x.optimizer * 8 / 12, rel=1e-12)
        assert replace(y, optimizer=0.0).total == pytest.approx(replace(x, optimizer=0.0).total, rel=1e-12)


def test_bf16_moments_shrink_moe_expert_and_other_optimizer_state_alike(h800):
    kw = dict(dp=64, global_batch=128, zero=1, ep=8)
    a, b = fam.memory(SMALL, h800, Strategy(**kw)), fam.memory(SMALL, h800, Strategy(**kw, optimizer_moments="bf16"))
    assert [y.optimizer for y in b] == pytest.approx([x.optimizer * 8 / 12 for x in a], rel=1e-12)
    assert [y.activations for y in b] == [x.activations for x in a]


def test_bf16_moments_shorten_only_the_optimizer_step_by_the_moments_bytes():
    s = Strategy(pp=2, dp=4, global_batch=16, zero=1)
    a, b = (evaluate(GPT, A100, x).metrics for x in (s, replace(s, optimizer_moments="bf16")))
    gpu = A100.gpu
    for i, (x, y) in enumerate(zip(a.stage_breakdown, b.stage_breakdown)):
        assert (x["compute"], x["tp"]) == (y["compute"], y["tp"])
        # Adam reads and writes both moments: 2 · 2 · (4 − 2) bytes less per updated (1/dp) parameter
        updated = step.stage_params(GPT, s, i) / s.dp
        assert x["optimizer"] - y["optimizer"] == pytest.approx(8 * updated / (gpu.hbm_bandwidth * gpu.memory_efficiency))


# ----------------------------------------------------------------------------- SwiGLU input stored in FP8

@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("tp, sp", [(1, False), (2, False), (2, True)])
def test_fp8_activation_store_halves_the_mlp_activation_input(gated, tp, sp):
    # Korthikanti §4.2: the activation's input is 2sbf (4sbf for SwiGLU's gate and up) over t; FP8: half of it
    model = replace(GPT, activation="swiglu" if gated else "gelu")
    s = Strategy(tp=tp, sequence_parallel=sp, global_batch=1)
    saved = activation_bytes_per_layer(model, s, True) - activation_bytes_per_layer(
        model, replace(s, fp8_activation_store=True), True)
    sbf = model.seq_len * model.ffn_hidden
    assert saved == pytest.approx((2 if gated else 1) * sbf / tp, rel=1e-12)


@pytest.mark.parametrize("precision", ["bf16", "fp8-blockwise"])
@pytest.mark.parametrize("recompute", ["none", "modules"])
def test_fp8_activation_store_halves_the_experts_and_shared_experts_swiglu_inputs(precision, recompute):
    s = Strategy(dp=64, global_batch=128, zero=1, ep=8, precision=precision, recompute=recompute)
    dense0, moe0 = fam.moe_activation_bytes(SMALL, s, True)
    dense1, moe1 = fam.moe_activation_bytes(SMALL, replace(s, fp8_activation_store=True), True)
    sb = SMALL.seq_len
    rows = SMALL.experts // 8 * moe.expert_rows(SMALL, s)
    # gate and up (2 values per width), 2 bytes → 1: the dense MLP's, the routed copies' and the shared expert's
    assert dense0 - dense1 == pytest.approx(2 * sb * SMALL.ffn_hidden, rel=1e-12)
    assert moe0 - moe1 == pytest.approx(2 * rows * SMALL.moe_ffn_hidden + 2 * sb * SMALL.moe_ffn_hidden, rel=1e-12)


def test_fp8_activation_store_casts_every_stored_value_there_and_back(h800):
    # Megatron-LM fused_bias_swiglu.py: .to(float8) after the forward, .to(bf16) before the backward, 3 bytes each
    s = Strategy(dp=64, global_batch=128, zero=1, ep=8)
    plain = moe.moe_layer(SMALL, h800, moe.layer_key(s)).compute
    stored = moe.moe_layer(SMALL, h800, moe.layer_key(replace(s, fp8_activation_store=True))).compute
    rows = SMALL.experts // 8 * moe.expert_rows(SMALL, s)
    values = {"expert.activation": rows * 2 * SMALL.moe_ffn_hidden,
              "shared.activation": SMALL.seq_len * 2 * SMALL.moe_ffn_hidden}
    for ops, suffix in ((stored.forward, "fp8_store"), (stored.backward, "fp8_load")):
        casts = {op.name: op for op in ops if op.name.endswith(suffix)}
        assert set(casts) == {f"{k}.{suffix}" for k in values}
        for k, n in values.items():
            op = casts[f"{k}.{suffix}"]
            assert op.bytes == pytest.approx(3 * n)
            assert op.seconds == pytest.approx(compute.memory_time(h800.gpu, 3 * n))
    extra = sum(op.seconds for op in stored.forward) - sum(op.seconds for op in plain.forward)
    assert extra == pytest.approx(sum(compute.memory_time(h800.gpu, 3 * n) for n in values.values()), rel=1e-9)
    # recompute modules runs the SwiGLU again from its stored input: the cast to FP8 is not repeated
    assert not any(op.name.endswith("fp8_store") for op in moe.moe_layer(
        SMALL, h800, moe.layer_key(replace(s, fp8_activation_store=True, recompute="modules"))).compute.recompute)


def test_dense_layer_casts_its_mlp_activation_input():
    lay = layer.layer_compute(GPT, A100, 1, 1, False, 1, "none", "bf16", True)
    values = GPT.seq_len * GPT.ffn_hidden
    assert [op.bytes for op in lay.forward if op.name == "activation.fp8_store"] == [3 * values]
    assert [op.bytes for op in lay.backward if op.name == "activation.fp8_load"] == [3 * values]


# ---------------------------------------------------------------------------------- labels and launch flags

def test_defaults_leave_the_plan_s_label_and_record_as_before():
    s = Strategy(pp=2, dp=4, global_batch=16)
    assert "optimizer_moments" not in s.to_dict() and "fp8_activation_store" not in s.to_dict()
    t = replace(s, optimizer_moments="bf16", fp8_activation_store=True)
    assert t.short() == s.short() + " adam-bf16 a8"
    assert Strategy(**t.to_dict()) == t


def test_megatron_arguments_name_the_precision_aware_optimizer_and_fp8_input_store():
    args = " ".join(megatron_args(Strategy(dp=8, global_batch=8, zero=1, optimizer_moments="bf16",
                                           fp8_activation_store=True), None))
    assert "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16" in args
    assert "--activation-func-fp8-input-store" in args
    plain = " ".join(megatron_args(Strategy(dp=8, global_batch=8, zero=1), None))
    assert "exp-avg" not in plain and "fp8-input-store" not in plain


def test_deepseek_v3_dualpipe_fits_at_ep64_with_its_numerics():
    # DeepSeek-V3 §3.2: PP16 EP64 DualPipe (two parameter copies) on 80 GB; without the FP8-stored SwiGLU inputs
    # (§3.3.3) the memory model puts its fullest rank over the H800's memory
    model, cluster = get_model("deepseek-v3"), load_cluster("dgx-h800-80g", 2048)
    kw = dict(tp=1, pp=16, dp=128, ep=64, zero=1, global_batch=15360, precision="fp8-blockwise", deepseek_fp8=True,
              recompute="modules", schedule="dualpipe", first_stage_layers=3, last_stage_layers=2)
    assert not evaluate(model, cluster, Strategy(**kw)).feasible
    assert not evaluate(model, cluster, Strategy(**kw, optimizer_moments="bf16")).feasible
    assert evaluate(model, cluster, Strategy(**kw, optimizer_moments="bf16", fp8_activation_store=True)).feasible


def test_cnn_and_dlrm_plans_refuse_the_transformer_numerics():
    from autoplan.families.cnn import family as cnn
    from autoplan.families.dlrm import family as dlrm
    from autoplan.families.catalog import get_model as model_named

    for family, name in ((cnn, "resnet50"), (dlrm, "dlrm-criteo")):
        for kw in (dict(optimizer_moments="bf16"), dict(fp8_activation_store=True)):
            reasons = family.violations(model_named(name), 8, Strategy(dp=8, global_batch=64, **kw))
            assert any(next(iter(kw)) in r for r in reasons), (name, kw, reasons)
