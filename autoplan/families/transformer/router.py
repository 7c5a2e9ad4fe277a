"""Megatron-Core's MoE router (``TopKRouter``) as the GPU runs it in training: the gating GEMM, then a chain of small
kernels over the [tokens, experts] routing scores (top-k, softmax, the routing map, capacity dropping, the
load-balancing loss), an all-reduce of the per-expert token counts, and their backward.

Kernel counts are read off the code (one kernel per PyTorch op on a GPU tensor, ``zeros_like(x).scatter(...)``
three: fill, copy, scatter): unfused, core_v0.12.0 ``moe_utils.topk_softmax_with_capacity`` and
``router.aux_loss_load_balancing`` (0.10 has the same kernels; 0.9 two fewer forward and two more backward with a
capacity, seven and one fewer dropless); fused (``--moe-router-fusion``, core 0.14 on), core_v0.15.0 with Transformer
Engine's ``fused_topk_with_score_function``, ``fused_compute_score_for_moe_aux_loss`` and ``fused_moe_aux_loss``, one
kernel each. Each small kernel reads or writes about one 16-bit [tokens, experts] tensor. DeepSeek-V3's own stack
(``Plan.deepseek_fp8``) is not Megatron-Core's: its router keeps the gating GEMM and one top-k pass.
"""

from __future__ import annotations

from autoplan.hardware import compute, network
from autoplan.hardware.compute import BF16, Op
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

UNFUSED = {"routing": (14, 7), "capacity": (6, 1), "aux_loss": (8, 7)}
"""(forward, backward) small kernels of each part of the unfused router (core_v0.12.0 moe_utils.py, router.py):
routing: top-k over experts (radix select and sort, 2), the fp32 softmax of the top-k with its casts (3), the dense
probabilities ``zeros_like().scatter()`` (3), the routing map ``zeros_like().int().scatter().bool()`` (5), the token
counts ``sum`` (1); backward the scatter's gather (1), the softmax's with its casts (3), the top-k's
``new_zeros`` and scatter (3). capacity: top-k over tokens (1), the capacity mask (4), probabilities × mask (1);
backward the product's (1). aux_loss: the fp32 softmax of all logits (2), its sum over tokens (1), the loss
(mul, sum, mul: 3), the loss tracker (div, add: 2); backward ``MoEAuxLossAutoScaler``'s ``ones_like`` × scale
(2), the loss chain (2), the softmax's with its cast (2), and the add of the two gradients of the logits (1)."""

FUSED = {"routing": (1, 2), "capacity": (6, 1), "aux_loss": (5, 7)}
"""The same parts with --moe-router-fusion (core_v0.15.0, Transformer Engine router kernels): routing: the fused
top-k (1); backward a zero fill of the boolean routing map's gradient and the fused backward (2). capacity: not
fused (as above). aux_loss: the fused scores (1), the token counts ``sum`` (1), the fused loss (1), the tracker
(2); backward the auto-scaler (3: its gradient cast to the 16-bit loss), the fused loss and score backwards with a
zero fill (3), the add of the two gradients of the logits (1)."""

FORCED_BALANCE_KERNELS = 2
"""Forced balancing's random logits in place of the gating's (core_v0.15.0 moe_utils.RandomSTE: ``clone`` and
``normal_``; its backward passes the gradient through)."""

GRAD_HOOK_KERNELS = 1
"""Megatron DDP's ``main_grad.add_`` of the router weight's gradient, every micro-batch (the router weight takes no
gradient-accumulation fusion: distributed_data_parallel.py ``_make_backward_post_hook``)."""


def router_kernels(model: ModelSpec) -> tuple[int, int]:
    """Small kernels of the router per micro-batch, forward and backward, besides its three GEMMs."""
    parts = FUSED if model.router_fusion else UNFUSED
    # a capacity of the router's own (--moe-expert-capacity-factor), not the balanced load of forced balancing
    capacity = bool(model.capacity_factor) and not model.force_balanced_routing
    used = ("routing",) + (("capacity",) if capacity else ()) + (("aux_loss",) if model.aux_loss else ())
    fwd = sum(parts[p][0] for p in used) + (FORCED_BALANCE_KERNELS if model.force_balanced_routing else 0)
    bwd = sum(parts[p][1] for p in used) + GRAD_HOOK_KERNELS
    return fwd, bwd


def count_all_reduce(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """Seconds the compute stream waits for the load-balancing loss's all-reduce of the per-expert token counts over
    the TP×CP ranks that split the sequence (core_v0.12.0 moe_utils.switch_load_balancing_loss_func, a synchronous
    ``torch.distributed.all_reduce``; none on one rank); 0 without the loss."""
    if not model.aux_loss or s.tp * s.cp == 1:
        return 0.0
    # a few bytes: its latency (Thakur et al. 2005: ring steps' α terms), as fp8_scaling's amax all-reduce
    return network.all_reduce_latency(cluster, network.group_shape(cluster.domain_gpus, s.tp * s.cp, 1))


def input_grad_adds(model: ModelSpec) -> int:
    """Adds that sum the MoE layer input's gradient: the router, the dispatcher and the shared experts each read the
    same normed hidden states, and autograd adds their gradients (Megatron-Core moe_layer.py ``forward``)."""
    return 1 + (1 if model.shared_experts else 0)


def router_ops(model: ModelSpec, cluster: ClusterSpec, s: Plan, gpu, tokens: int,
               wgrad_bytes: float = BF16) -> tuple[list[tuple[Op, int]], list[tuple[Op, int]]]:
    """The router's forward and backward kernels for ``tokens`` tokens, each with the host launches it costs (one
    per module call: ``compute.host_exposed``); ``gpu``: the GPU its GEMMs run on."""
    e, h = model.experts, model.hidden
    # Fedus et al. 2021 §2.1: router logits x·W_r (h×E); its backward's dgrad and wgrad (Narayanan et al. SC'21 §5.1)
    gemm = compute.gemm_op(gpu, "router", tokens, e, h)
    grads = compute.linear_backward(gpu, "router", tokens, e, h, wgrad_bytes=wgrad_bytes)
    if s.deepseek_fp8:
        # DeepSeek-V3's own router: top-k over fp32 scores (read, write)
        topk = compute.memory_op(gpu, "router.topk", 4 * 2 * tokens * e, 2)
        return [(gemm, 1), (topk, 1)], [(op, 1) for op in grads]
    fwd_k, bwd_k = router_kernels(model)
    scores = BF16 * tokens * e
    fwd = [(gemm, 1), (compute.memory_op(gpu, "router.routing", fwd_k * scores, fwd_k), 1)]
    wait = count_all_reduce(model, cluster, s)
    if wait:
        fwd.append((Op("router.count_all_reduce", 0.0, 0.0, wait), 1))
    # the elementwise add of two 16-bit [tokens, h] gradients: read both, write one (autograd's own accumulation, no
    # module call for the host)
    adds = input_grad_adds(model)
    bwd = [(compute.memory_op(gpu, "router.routing.bwd", bwd_k * scores, bwd_k), 1), *((op, 1) for op in grads),
           (compute.memory_op(gpu, "moe.input_grad_add", adds * 3 * BF16 * tokens * h, adds), 0)]
    return fwd, bwd
