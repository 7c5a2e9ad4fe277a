"""FP8 attention (``TransformerPlan.fp8_attention``, Megatron-Core ``--fp8-dot-product-attention``): the fused
kernel's forward and backward at the GPU's measured FP8/BF16 time ratios; under a sliding window the FP8 backward
over every causal block, as cuDNN's computes it; an FP8 precision, Megatron-Core's flag."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.families.transformer import layer
from autoplan.families.transformer.export import megatron_args
from autoplan.families.transformer.frameworks import deepspeed_violations, torchtitan_violations
from autoplan.sim.simulate import evaluate
from autoplan.specs.cluster import load_cluster

GB200 = load_cluster("gb200-nvl72", 64)
LLAMA = get_model("llama3-8b")
PLAN = Strategy(tp=1, pp=1, dp=64, micro_batch=2, global_batch=128, zero=1, precision="mxfp8", fp8_param_gather=True)


def _core(model, fp8: bool):
    return layer.attention_ops(GB200, model, 2, 4096, 4096, 64, False, True, fp8)


def test_the_kernels_take_the_measured_ratios():
    (bf16_f, bf16_b), (fp8_f, fp8_b) = _core(LLAMA, False), _core(LLAMA, True)
    over = GB200.gpu.kernel_overhead
    assert fp8_f.seconds - over == pytest.approx((bf16_f.seconds - over) * GB200.gpu.fp8_attention_fwd_ratio)
    assert fp8_b.seconds - over == pytest.approx((bf16_b.seconds - over) * GB200.gpu.fp8_attention_bwd_ratio)
    # on the GB200 MXFP8 attention's forward is faster and its backward slower (cudnn-frontend's benchmark)
    assert GB200.gpu.fp8_attention_fwd_ratio < 1 < GB200.gpu.fp8_attention_bwd_ratio


def test_a_windowed_fp8_backward_computes_every_causal_block():
    oss = get_model("gpt-oss-120b")
    windowed = replace(oss, window_layers=0)            # every layer behind the 128-key window
    full = replace(oss, window=0, window_layers=0)
    (wf, wb), (ff, fb) = _core(windowed, True), _core(full, True)
    assert wb.flops == fb.flops and wf.flops < ff.flops / 5
    assert _core(windowed, False)[1].flops == _core(windowed, False)[0].flops * 2.5


def test_it_needs_an_fp8_precision_and_only_megatron_sets_it():
    s = replace(PLAN, fp8_attention=True)
    assert evaluate(LLAMA, GB200, s).feasible
    bad = replace(s, precision="bf16", fp8_param_gather=False)
    assert any("fp8_attention" in r for r in evaluate(LLAMA, GB200, bad).violations)
    assert "--fp8-dot-product-attention" in megatron_args(s, LLAMA)
    assert "--fp8-dot-product-attention" not in megatron_args(PLAN, LLAMA)
    for rules in (torchtitan_violations, deepspeed_violations):
        assert any("fp8_attention" in r for r in rules(LLAMA, s))
    assert "fp8attn" in s.short().split()
