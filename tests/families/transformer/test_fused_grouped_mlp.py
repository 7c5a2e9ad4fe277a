"""Transformer Engine's CuTe-DSL fused grouped MLP (``MoEPlan.fused_grouped_mlp``): the experts' activation, its
FP8 cast, the probability-scaled fc2 bias and their backwards run in the grouped GEMMs' epilogues, and HybridEP's
token counts never reach the host; Megatron-Core's op fuser, and no other framework's."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.families.transformer import moe_layer as moe
from autoplan.families.transformer.export import megatron_args, megatron_text
from autoplan.families.transformer.frameworks import (deepspeed_violations, megatron_violations,
                                                      torchtitan_violations)
from autoplan.sim.simulate import evaluate
from autoplan.specs.cluster import load_cluster

GB200 = load_cluster("gb200-nvl72", 64)
OSS = get_model("gpt-oss-120b")
PLAN = Strategy(tp=1, pp=1, dp=64, micro_batch=4, global_batch=1280, zero=1, ep=64, precision="mxfp8",
                fp8_param_gather=True, moe_dispatcher="flex")
FUSED = replace(PLAN, fused_grouped_mlp=True)
BETWEEN = {"expert.activation", "expert.fc2.quantize", "expert.fc2.bias", "expert.activation.bwd",
           "expert.fc1.quantize_grad", "expert.fc2.bias.bwd"}
"""What the unfused experts run between and after their grouped GEMMs."""


def _ops(s: Strategy) -> dict[str, float]:
    lay = moe.moe_layer(OSS, GB200, moe.layer_key(s)).compute
    return {op.name: op.seconds for op in lay.forward + lay.backward}


def test_the_fused_mlp_runs_no_kernel_between_the_grouped_gemms():
    eager, fused = _ops(PLAN), _ops(FUSED)
    assert BETWEEN <= set(eager) and not BETWEEN & set(fused)
    # everything else is priced alike: the GEMMs, fc1's input cast, fc2's gradient cast, the permutations
    assert {k: v for k, v in eager.items() if k not in BETWEEN and not k.startswith("host.")} == {
        k: v for k, v in fused.items() if not k.startswith("host.")}


def test_hybridep_feeding_the_fused_mlp_leaves_the_host_unsynced():
    # eager, the dispatcher's token counts reach the host every layer; with HybridEP and the fused MLP they stay on
    # the GPU, so a slow host waits no longer than its issue time exceeds the GPU's
    slow = replace(GB200, gpu=replace(GB200.gpu, host_launch=2e-3))
    waits = {s.fused_grouped_mlp: sum(op.seconds for op in moe.moe_layer(OSS, slow, moe.layer_key(s)).compute.forward
                                      if op.name == "host.wait") for s in (PLAN, FUSED)}
    assert waits[True] < waits[False]


@pytest.mark.parametrize("change, needle", [
    (dict(precision="bf16", fp8_param_gather=False), "mxfp8"), (dict(etp=2, dp=64), "etp 1")])
def test_the_fused_mlp_needs_mxfp8_and_no_expert_tp(change, needle):
    s = replace(FUSED, **change)
    reasons = evaluate(OSS, load_cluster("gb200-nvl72", 128 if s.etp > 1 else 64), s).violations
    assert any("fused_grouped_mlp" in r and needle in r for r in reasons)
    assert evaluate(OSS, GB200, FUSED).feasible


def test_a_dense_model_has_no_experts_to_fuse():
    s = Strategy(tp=1, pp=1, dp=64, global_batch=64, zero=1, precision="mxfp8", fused_grouped_mlp=True)
    assert any("fused_grouped_mlp" in r for r in evaluate(get_model("llama3-8b"), GB200, s).violations)


def test_only_megatron_runs_it_and_its_export_says_how():
    assert {"--use-transformer-engine-op-fuser", "--moe-mlp-glu-interleave-size 32"} <= set(megatron_args(FUSED, OSS))
    assert "--use-transformer-engine-op-fuser" not in megatron_args(PLAN, OSS)
    assert "NVTE_CUTEDSL_FUSED_GROUPED_MLP=1" in megatron_text(FUSED, OSS)
    assert not any("fused_grouped_mlp" in r for r in megatron_violations(OSS, FUSED))
    for rules in (torchtitan_violations, deepspeed_violations):
        assert any("fused_grouped_mlp" in r for r in rules(OSS, FUSED))
        assert not any("fused_grouped_mlp" in r for r in rules(OSS, PLAN))
    assert "fgm" in FUSED.short().split() and "fgm" not in PLAN.short().split()
