"""CPU offload (Megatron-Core): activations of some layers and a share of the optimizer state in host memory."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.families.catalog import get_model
from autoplan.families.registry import violations
from autoplan.families.strategy import Strategy
from autoplan.families.transformer import memory, moe, step
from autoplan.families.transformer.passes import pass_costs
from autoplan.hardware.support import hardware_violations
from autoplan.specs.cluster import load_cluster

H100 = load_cluster("dgx-h100-80g", 8)
LLAMA = get_model("llama3-8b")


def _plan(**kw) -> Strategy:
    return Strategy(**{"dp": 8, "global_batch": 64, "zero": 1, **kw})


@pytest.mark.parametrize("pct", [25, 50, 75, 100])
def test_optimizer_offload_moves_its_share_of_the_state_to_the_host_and_pays_the_cpu_step(pct):
    base = memory.stage_memory(LLAMA, H100, _plan(), 0)
    off = memory.stage_memory(LLAMA, H100, _plan(optimizer_offload_pct=pct), 0)
    assert off.optimizer == pytest.approx(base.optimizer * (1 - pct / 100))
    assert (off.weights, off.gradients, off.activations) == (base.weights, base.gradients, base.activations)
    params = step.stage_params(LLAMA, _plan(), 0)
    host = params / 8 * pct / 100
    gpu = H100.gpu
    # the longer of CPU Adam and the copies, on top of the GPU's share of the step
    extra = max(host / gpu.host_adam_params_per_s, host * (4 + 2) / gpu.host_link)
    assert step._optimizer(H100, _plan(optimizer_offload_pct=pct), params) >= extra
    assert step._optimizer(H100, _plan(optimizer_offload_pct=pct), params) > step._optimizer(H100, _plan(), params)


def test_activation_offload_keeps_one_layer_in_flight_and_waits_only_for_what_compute_cannot_hide():
    s = _plan(micro_batch=1)
    base = memory.stage_memory(LLAMA, H100, s, 0).activations
    off = memory.stage_memory(LLAMA, H100, replace(s, activation_offload_layers=16), 0).activations
    assert off == pytest.approx(base * (LLAMA.layers - 16 + 1) / LLAMA.layers)
    slow = replace(H100, gpu=replace(H100.gpu, host_link=1e9))       # a 1 GB/s link cannot hide the copies
    key = (True, True, True)
    assert pass_costs(LLAMA, slow, replace(s, activation_offload_layers=16))[key].seconds > \
        pass_costs(LLAMA, slow, s)[key].seconds
    assert pass_costs(LLAMA, H100, replace(s, activation_offload_layers=1))[key].seconds == \
        pytest.approx(pass_costs(LLAMA, H100, s)[key].seconds)


@pytest.mark.parametrize("kw, needle", [
    (dict(activation_offload_layers=4, recompute="full"), "needs pp 1 and recompute none"),
    (dict(activation_offload_layers=99), "more than the model's 32 layers"),
    (dict(optimizer_offload_pct=50, zero=0), "needs the distributed optimizer"),
])
def test_megatron_core_rules(kw, needle):
    assert any(needle in v for v in violations(LLAMA, 8, _plan(**kw)))


def test_a_cluster_without_a_host_link_cannot_offload():
    bare = replace(H100, gpu=replace(H100.gpu, host_link=0.0))
    assert hardware_violations(LLAMA, bare, _plan(activation_offload_layers=2))
    assert hardware_violations(LLAMA, bare, _plan(optimizer_offload_pct=50))
    assert not hardware_violations(LLAMA, H100, _plan(optimizer_offload_pct=50))


@pytest.mark.parametrize("pct", [50, 100])
def test_a_moe_model_offloads_its_optimizer_share_of_both_parameter_kinds(pct):
    # Megatron-Core's HybridDeviceOptimizer takes the same share of the dense and the expert shards
    mixtral, h100 = get_model("mixtral-8x7b"), load_cluster("dgx-h100-80g", 64)
    s = Strategy(dp=64, pp=1, global_batch=64, zero=1, ep=8)
    off = replace(s, optimizer_offload_pct=pct)
    assert not violations(mixtral, 64, off)
    base, cut = (moe.memory(mixtral, h100, x)[0] for x in (s, off))
    assert cut.optimizer == pytest.approx(base.optimizer * (1 - pct / 100))
    assert (cut.weights, cut.gradients, cut.activations) == (base.weights, base.gradients, base.activations)
    dense, expert = moe.stage_params(mixtral, s, 0)
    host = (dense / 64 + expert / s.edp) * pct / 100
    # the longer of CPU Adam and the copies, on top of the GPU's share of the step
    extra = max(host / h100.gpu.host_adam_params_per_s, host * (4 + 2) / h100.gpu.host_link)
    assert step.host_optimizer_time(h100, off, host) == pytest.approx(extra)
    assert moe._optimizer(h100, off, (dense, expert)) >= extra > moe._optimizer(h100, s, (dense, expert))
    assert violations(mixtral, 64, replace(s, activation_offload_layers=2))

