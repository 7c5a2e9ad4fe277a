"""Megatron-LM and torchtitan export of MoE plans: expert degrees, MoE and MLA model arguments; dense plans
unchanged."""

from __future__ import annotations

from autoplan.report.export import megatron_args
from autoplan.families.transformer.frameworks import torchtitan_violations
from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy


def test_moe_plans_export_expert_parallelism_and_the_moe_arguments():
    s = Strategy(tp=1, pp=16, dp=128, ep=64, zero=1, global_batch=15360, first_stage_layers=3, last_stage_layers=2,
                 ep_overlap=True)
    args = megatron_args(s, get_model("deepseek-v3"))
    for flag in ("--expert-model-parallel-size 64", "--expert-tensor-parallel-size 1", "--num-experts 256",
                 "--moe-router-topk 8", "--moe-grouped-gemm", "--moe-token-dispatcher-type alltoall",
                 "--moe-ffn-hidden-size 2048", "--moe-shared-expert-intermediate-size 2048",
                 '--moe-layer-freq "([0]*3+[1]*58)"', "--multi-latent-attention", "--kv-lora-rank 512",
                 "--q-lora-rank 1536", "--qk-pos-emb-head-dim 64", "--v-head-dim 128",
                 "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"):
        assert flag in args, flag
    # torchtitan runs its own DeepSeek-V3 flavors, not the catalog's model through this export
    assert any("defines no deepseek-v3" in r for r in torchtitan_violations(get_model("deepseek-v3"), s))


def test_dense_plans_export_no_expert_arguments():
    args = " ".join(megatron_args(Strategy(tp=8, pp=8, dp=16, global_batch=1536), get_model("gpt3")))
    assert "expert" not in args and "moe" not in args and "latent" not in args
    assert Strategy(tp=8).to_dict().keys().isdisjoint({"ep", "etp", "ep_overlap"})


def test_drop_and_pad_routing_exports_its_capacity_and_padding():
    from dataclasses import replace
    s = Strategy(tp=1, pp=2, dp=8, ep=8, zero=1, global_batch=512, micro_batch=2)
    model = get_model("qwen3-30b-a3b")
    padded = megatron_args(s, replace(model, capacity_factor=1.0, pad_to_capacity=True))
    assert "--moe-expert-capacity-factor 1" in padded and "--moe-pad-expert-input-to-capacity" in padded
    assert not any("capacity" in a for a in megatron_args(s, model))        # dropless: neither flag
