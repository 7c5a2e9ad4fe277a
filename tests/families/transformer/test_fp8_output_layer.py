"""The output layer in MXFP8 (``TransformerPlan.fp8_output_layer``, Megatron-Core ``--fp8-output-proj``): its GEMMs
at the MXFP8 rate after casts of its input and of the logits' gradient; mxfp8 only, Megatron-Core's flag."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.families.transformer import layer
from autoplan.families.transformer.export import megatron_args
from autoplan.families.transformer.frameworks import deepspeed_violations, torchtitan_violations
from autoplan.hardware.compute import gemm_time
from autoplan.sim.simulate import evaluate
from autoplan.specs.cluster import load_cluster

GB200 = load_cluster("gb200-nvl72", 64)
LLAMA = get_model("llama3-8b")
PLAN = Strategy(tp=1, pp=1, dp=64, micro_batch=2, global_batch=128, zero=1, precision="mxfp8", fp8_param_gather=True)


def _head(mxfp8: bool) -> dict[str, float]:
    fwd, bwd, _ = layer.output_compute(LLAMA, GB200, 1, 1, False, 2, True, 2, mxfp8)
    return {op.name: op.seconds for op in fwd + bwd}


def test_the_head_runs_its_gemms_at_the_mxfp8_rate_after_two_casts():
    bf16, fp8 = _head(False), _head(True)
    tokens, vocab, h = 2 * LLAMA.seq_len, 128256, LLAMA.hidden
    f8 = layer.fp8_gemm_gpu(GB200.gpu, "mxfp8")
    assert fp8["logits"] == pytest.approx(gemm_time(f8, tokens, vocab, h, fp8=True))
    assert bf16["logits"] == pytest.approx(gemm_time(GB200.gpu, tokens, vocab, h))
    assert set(fp8) - set(bf16) == {"logits.quantize", "logits.quantize_grad"}
    assert fp8["logits"] < bf16["logits"] / 1.5 and sum(fp8.values()) < sum(bf16.values())


def test_only_mxfp8_runs_the_head_in_fp8():
    s = replace(PLAN, fp8_output_layer=True)
    assert evaluate(LLAMA, GB200, s).feasible
    for precision in ("fp8", "bf16"):
        bad = replace(s, precision=precision, fp8_param_gather=precision != "bf16")
        assert any("fp8_output_layer" in r for r in evaluate(LLAMA, GB200, bad).violations)
    faster = evaluate(LLAMA, GB200, s).metrics.step_time < evaluate(LLAMA, GB200, PLAN).metrics.step_time
    assert faster


def test_only_megatron_sets_it():
    s = replace(PLAN, fp8_output_layer=True)
    assert "--fp8-output-proj" in megatron_args(s, LLAMA) and "--fp8-output-proj" not in megatron_args(PLAN, LLAMA)
    for rules in (torchtitan_violations, deepspeed_violations):
        assert any("fp8_output_layer" in r for r in rules(LLAMA, s))
    assert "fp8head" in s.short().split()
