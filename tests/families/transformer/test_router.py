"""The MoE router's small kernels, its token-count all-reduce and the input gradient's adds (router.py), against the
kernel counts read off Megatron-Core's code."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.errors import SpecError
from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.families.transformer import moe_layer as moe
from autoplan.families.transformer import router
from autoplan.hardware import network
from autoplan.hardware.compute import BF16
from autoplan.specs.cluster import load_cluster
from autoplan.validate import files
from autoplan.validate.transformer import model_of

H100 = load_cluster("dgx-h100-80g", 64)
MIXTRAL = get_model("mixtral-8x7b")


@pytest.mark.parametrize("fusion, capacity, aux, expected", [
    # core_v0.12.0 unfused: Grok-1's capacity path (29 forward kernels, 19 backward, less the GEMMs and the input add)
    (False, 1.0, True, (28, 16)),
    (False, 0.0, True, (22, 15)),            # dropless with the loss
    (True, 1.0, True, (12, 11)),             # core_v0.15.0 --moe-router-fusion with a capacity
    (True, 0.0, True, (6, 10)),              # fused, dropless (Qwen3 on Megatron-Bridge)
    (True, 0.0, False, (1, 3)),              # fused without the loss (GPT-OSS: load balancing "none")
])
def test_router_kernels_are_the_codes_counts(fusion, capacity, aux, expected):
    model = replace(MIXTRAL, router_fusion=fusion, capacity_factor=capacity, aux_loss=aux)
    assert router.router_kernels(model) == expected


def test_forced_balancing_is_a_load_not_a_router_capacity():
    # no capacity dropping; its random logits (RandomSTE: clone, normal_) are two more forward kernels
    balanced = replace(MIXTRAL, capacity_factor=1.0, force_balanced_routing=True)
    f, b = router.router_kernels(replace(MIXTRAL, capacity_factor=0.0))
    assert router.router_kernels(balanced) == (f + router.FORCED_BALANCE_KERNELS, b) == (f + 2, b)


def test_the_count_all_reduce_spans_the_ranks_that_split_the_sequence():
    s = moe.layer_key(Strategy(tp=4, cp=2, ep=8, dp=8, global_batch=64, sequence_parallel=True))
    shape = network.group_shape(H100.domain_gpus, 8, 1)
    assert router.count_all_reduce(MIXTRAL, H100, s) == network.all_reduce_latency(H100, shape) > 0
    assert router.count_all_reduce(replace(MIXTRAL, aux_loss=False), H100, s) == 0.0
    one = moe.layer_key(Strategy(tp=1, ep=8, dp=64, global_batch=64))
    assert router.count_all_reduce(MIXTRAL, H100, one) == 0.0        # core 0.12 on: none on one rank


def test_the_layer_input_gradient_adds_one_consumer_after_the_first():
    assert router.input_grad_adds(MIXTRAL) == 1
    assert router.input_grad_adds(replace(MIXTRAL, shared_experts=1)) == 2


def test_the_router_ops_price_each_small_kernel_and_the_input_add():
    s = moe.layer_key(Strategy(tp=4, ep=8, dp=16, global_batch=64, sequence_parallel=True))
    tokens = moe.local_tokens(MIXTRAL, s)
    fwd, bwd = router.router_ops(MIXTRAL, H100, s, H100.gpu, tokens)
    names = [op.name for op, _ in fwd]
    assert names == ["router", "router.routing", "router.count_all_reduce"]
    routing = dict((op.name, op) for op, _ in fwd + bwd)
    f, b = router.router_kernels(MIXTRAL)
    gpu = H100.gpu
    assert routing["router.routing"].seconds >= f * gpu.kernel_overhead
    assert routing["router.routing.bwd"].seconds >= b * gpu.kernel_overhead
    # read two 16-bit [tokens, h] gradients, write their sum
    assert routing["moe.input_grad_add"].bytes == 3 * BF16 * tokens * MIXTRAL.hidden
    # autograd's accumulation is no module call: the host launches nothing for it
    assert dict((op.name, n) for op, n in bwd)["moe.input_grad_add"] == 0


def test_deepseek_v3s_own_stack_keeps_one_top_k_pass():
    s = moe.layer_key(Strategy(ep=8, dp=64, global_batch=64, precision="fp8-blockwise", deepseek_fp8=True))
    fwd, bwd = router.router_ops(MIXTRAL, H100, s, H100.gpu, 4096)
    assert [op.name for op, _ in fwd] == ["router", "router.topk"]
    assert [op.name for op, _ in bwd] == ["router.dgrad", "router.wgrad"]


def test_the_router_makes_a_megatron_layer_slower_not_faster():
    s = moe.layer_key(Strategy(tp=4, ep=8, dp=16, global_batch=64, sequence_parallel=True))
    slow = moe.moe_layer(MIXTRAL, H100, s).compute
    fused = moe.moe_layer(replace(MIXTRAL, router_fusion=True), H100, s).compute
    assert sum(op.seconds for op in fused.forward + fused.backward) < sum(
        op.seconds for op in slow.forward + slow.backward)


@pytest.mark.parametrize("flag", ["aux_loss", "router_fusion", "force_balanced_routing"])
def test_the_router_flags_must_be_booleans(flag):
    with pytest.raises(SpecError, match=f"{flag} must be true or false"):
        replace(MIXTRAL, **{flag: 1})


def test_the_megatron_bridge_runs_state_their_router():
    cases = {c["id"]: c for c in files.load_default()["cases"]}
    oss = model_of(cases["bridge-h100-bf16-gpt-oss-120b-64gpu-26.02"]["model"])
    qwen = model_of(cases["bridge-h100-fp8cs-qwen3-30b-a3b-16gpu-25.11"]["model"])
    assert oss.router_fusion and not oss.aux_loss
    assert qwen.router_fusion and qwen.aux_loss and qwen.force_balanced_routing
