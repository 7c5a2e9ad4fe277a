"""Compute and communication of one mixture-of-experts layer (Megatron-Core MoE, alltoall token dispatcher) and of
multi-head latent attention, for one micro-batch on one GPU.

A MoE layer is the dense layer's attention block, then a router, the token dispatch (all-to-all over the EP group,
all-gather over the expert-TP group), grouped expert GEMMs over the local experts, the combine (the mirror
collectives) and the shared experts (a tensor-parallel dense MLP). Sizes follow Megatron-Core's MoE layer
(megatron/core/transformer/moe/README.md) and DeepSeek-V2/V3's MLA (arXiv 2405.04434 §2.1, 2412.19437 §2.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from autoplan.cost import compute, network
from autoplan.cost.compute import BF16, Collective, LayerCompute, Op
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.strategy import Strategy

LOAD_IMBALANCE = 1.15
"""Tokens of the busiest expert over the mean with auxiliary-loss balancing: every EP rank waits for the busiest
one. Fedus et al. 2021 (Switch Transformer, arXiv 2101.03961) §2.2 train with capacity factors 1.0-1.25 and drop
under 1 % of tokens at 1.25, so the busiest expert holds about 1.1-1.2× the mean; a model-level constant, not fitted
to any run. A model's ``capacity_factor`` > 0 caps it (tokens above capacity are dropped)."""

_DENSE_MLP = frozenset({"fc1", "activation", "fc2", "fc1.dgrad", "fc1.wgrad", "fc2.dgrad", "fc2.wgrad",
                        "activation.bwd"})
_MHA = frozenset({"qkv", "proj", "qkv.dgrad", "qkv.wgrad", "proj.dgrad", "proj.wgrad", "attention.flash",
                  "attention.flash.bwd", "attention.core", "attention.core.bwd"})


def imbalance(model: ModelSpec) -> float:
    """The busiest expert's tokens over the mean (the capacity factor when it caps the load)."""
    # Fedus et al. 2021 §2.1: expert capacity = capacity factor × tokens·top_k / experts
    return min(LOAD_IMBALANCE, model.capacity_factor) if model.capacity_factor else LOAD_IMBALANCE


def local_tokens(model: ModelSpec, s: Strategy) -> int:
    """Tokens one GPU routes per micro-batch: its s/cp share, split over TP by sequence parallelism."""
    # Megatron-Core MoE README: with tp > 1 and ep > 1 sequence parallelism is required; tokens reach the router
    # sequence-sharded (Korthikanti et al. 2022 §4.2.2)
    return s.micro_batch * (model.seq_len // s.cp) // (s.tp if s.sequence_parallel else 1)


def expert_rows(model: ModelSpec, s: Strategy) -> int:
    """Tokens the busiest local expert computes per micro-batch (the grouped GEMM's m per expert)."""
    # the ep·etp GPUs of one expert group route ep·etp·T·top_k tokens over the experts; each expert TP rank sees
    # all of its experts' tokens (all-gather over etp), at the busiest expert's load (imbalance)
    mean = s.ep * s.etp * local_tokens(model, s) * model.top_k / model.experts
    return max(1, math.ceil(mean * imbalance(model)))


def dispatch_bytes(model: ModelSpec, s: Strategy) -> float:
    """Bytes one GPU holds for the dispatch all-to-all: its T·top_k token copies of h bf16 values."""
    # Megatron-Core alltoall dispatcher: every routed copy is sent (to itself when its expert is local); the
    # (ep−1)/ep that leave the GPU are what network.all_to_all prices (Lepikhin et al. 2020, GShard §3.2)
    return BF16 * local_tokens(model, s) * model.top_k * model.hidden


def a2a_bytes_leaving(model: ModelSpec, s: Strategy) -> float:
    """Bytes one GPU sends to other EP ranks per dispatch (and receives per combine):
    tokens·top_k·h·2·(ep−1)/ep."""
    return dispatch_bytes(model, s) * (s.ep - 1) / s.ep


def ep_shape(cluster: ClusterSpec, s: Strategy) -> network.GroupShape:
    """Where an EP group sits: ep ranks etp apart (Megatron-Core expert rank order etp-ep-edp-pp)."""
    return network.group_shape(cluster.gpus_per_node, s.ep, s.etp)


def etp_shape(cluster: ClusterSpec, s: Strategy) -> network.GroupShape:
    """Where an expert-TP group sits: etp consecutive ranks."""
    return network.group_shape(cluster.gpus_per_node, s.etp, 1)


def edp_shape(cluster: ClusterSpec, s: Strategy) -> network.GroupShape:
    """Where an expert-data-parallel group sits: edp ranks ep·etp apart."""
    return network.group_shape(cluster.gpus_per_node, s.edp, s.ep * s.etp)


def all_to_all_time(cluster: ClusterSpec, s: Strategy, nbytes: float) -> float:
    """Seconds of one dispatch or combine all-to-all of ``nbytes`` per GPU over the EP group (NVLink inside a
    node, the NICs across nodes: network.all_to_all)."""
    return network.all_to_all(cluster, ep_shape(cluster, s), nbytes)


@dataclass(frozen=True, slots=True)
class MoELayer:
    """Kernels, TP/ETP collectives and EP all-to-all seconds of one layer for one micro-batch on one GPU."""

    compute: LayerCompute
    a2a_forward: float
    """Dispatch plus combine all-to-all of the forward pass (the backward has the same two, reversed)."""
    etp_forward: float
    """Expert-TP all-gather of the dispatched tokens and reduce-scatter of the experts' outputs (0 if etp = 1)."""


def _grouped(gpu, name: str, experts: int, m: int, n: int, k: int) -> Op:
    # grouped GEMM (Megatron-Core --moe-grouped-gemm, CUTLASS grouped GEMM): the local experts' GEMMs as one
    # batched launch, each of the busiest expert's m tokens (the slowest expert sets the time)
    return compute._gemm(gpu, name, m, n, k, experts)


def _grouped_backward(gpu, name: str, experts: int, m: int, n: int, k: int) -> tuple[Op, Op]:
    # dgrad (m×n)·(n×k) and wgrad (k×m)·(m×n) per expert (Narayanan et al. SC'21 §5.1)
    return compute._gemm(gpu, f"{name}.dgrad", m, k, n, experts), compute._gemm(gpu, f"{name}.wgrad", k, n, m, experts)


def _mla_ops(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """Forward and backward kernels of multi-head latent attention (projections and core)."""
    gpu, h, t, a = cluster.gpu, model.hidden, s.tp, model.heads
    tokens = s.micro_batch * model.seq_len // s.cp
    # DeepSeek-V2 (arXiv 2405.04434) §2.1.2-2.1.3: down-projections to the q and kv latents (replicated over TP,
    # Megatron-Core MLA), up-projections to heads/t heads, decoupled RoPE key, output projection (row-parallel)
    shapes = [("kv_down", tokens, model.kv_lora_rank + model.qk_rope_head_dim, h),
              ("kv_up", tokens, a * (model.head_dim + model.value_dim) // t, model.kv_lora_rank),
              ("o_proj", tokens, h, a * model.value_dim // t)]
    if model.q_lora_rank:
        shapes += [("q_down", tokens, model.q_lora_rank, h),
                   ("q_up", tokens, a * model.qk_head_dim // t, model.q_lora_rank)]
    else:
        shapes += [("q_proj", tokens, a * model.qk_head_dim // t, h)]
    fwd = [compute._gemm(gpu, name, m, n, k) for name, m, n, k in shapes]
    bwd = [op for name, m, n, k in shapes for op in compute._linear_backward(gpu, name, m, n, k)]
    # the core: QK^T over d + d_R, AV over d_v; FLOPs as heads of their mean width (attention_core_dim)
    proxy = replace(model, head_dim=model.attention_core_dim // model.heads, kv_lora_rank=0, q_lora_rank=0,
                    qk_rope_head_dim=0, v_head_dim=0, experts=0, top_k=0, moe_ffn_hidden=0, shared_experts=0,
                    dense_layers=0, family="dense")
    core_f, core_b = compute._attention(cluster, proxy, s.micro_batch, model.seq_len // s.cp, model.seq_len,
                                        a // t, model.dropout)
    return (*fwd, core_f), (*bwd, core_b)


def _attention_ops(model: ModelSpec, cluster: ClusterSpec, s: Strategy, dense: LayerCompute,
                   keep_mlp: bool) -> tuple[tuple[Op, ...], tuple[Op, ...], Op]:
    """The dense layer's kernels with MLA in place of its attention (when the model has it) and without the dense
    MLP unless ``keep_mlp``; and the attention core's forward."""
    drop = set() if keep_mlp else set(_DENSE_MLP)
    if model.mla:
        drop |= _MHA
    fwd = tuple(op for op in dense.forward if op.name not in drop)
    bwd = tuple(op for op in dense.backward if op.name not in drop)
    core = next(op for op in dense.forward if op.name.startswith("attention"))
    if model.mla:
        mla_f, mla_b = _mla_ops(model, cluster, s)
        fwd, bwd, core = fwd + mla_f, bwd + mla_b, mla_f[-1]
    return fwd, bwd, core


def _recompute(s: Strategy, cluster: ClusterSpec, forward: tuple[Op, ...], core: Op) -> tuple[Op, ...]:
    # Korthikanti et al. 2022 §4.2: selective recomputes the attention core, full recomputes the whole layer
    if s.recompute == "full":
        return forward
    if s.recompute == "selective" and not cluster.flash_attention:
        return (core,)
    return ()


@lru_cache(maxsize=4096)
def dense_layer(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> LayerCompute:
    """One dense-FFN layer of a MoE model (its leading ``dense_layers``), with MLA when the model has it."""
    dense = compute.layer_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch, s.recompute)
    if not model.mla:
        return dense
    fwd, bwd, core = _attention_ops(model, cluster, s, dense, keep_mlp=True)
    rec = _recompute(s, cluster, fwd, core)
    return replace(dense, forward=fwd, backward=bwd, recompute=rec, attention_forward=core.seconds)


@lru_cache(maxsize=4096)
def moe_layer(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> MoELayer:
    """One MoE layer for one micro-batch on one GPU: attention, router, dispatch, experts, combine, shared experts."""
    gpu, h, t = cluster.gpu, model.hidden, s.tp
    dense = compute.layer_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch, s.recompute)
    attn_f, attn_b, core = _attention_ops(model, cluster, s, dense, keep_mlp=False)
    tokens_in = local_tokens(model, s)
    experts = model.experts // s.ep
    rows = expert_rows(model, s)
    width = model.moe_ffn_hidden // s.etp
    up = (2 if model.gated else 1) * width
    routed = BF16 * tokens_in * model.top_k * h
    # Fedus et al. 2021 §2.1: router logits x·W_r (h×E), softmax and top-k over fp32 scores (read, write)
    router = compute._gemm(gpu, "router", tokens_in, model.experts, h)
    topk = compute._mem(gpu, "router.topk", 4 * 2 * tokens_in * model.experts, 2)
    # Megatron-Core permute/unpermute: gather each routed copy into expert order and back (read and write)
    permute = compute._mem(gpu, "permute", 2 * routed * s.etp)
    unpermute = compute._mem(gpu, "unpermute", 2 * routed * s.etp)
    act_bytes = BF16 * experts * rows * width * (3 if model.gated else 2)
    fwd = [router, topk, permute,
           _grouped(gpu, "expert.fc1", experts, rows, up, h), compute._mem(gpu, "expert.activation", act_bytes),
           _grouped(gpu, "expert.fc2", experts, rows, h, width), unpermute]
    bwd = [compute._mem(gpu, "unpermute.bwd", 2 * routed * s.etp),
           *_grouped_backward(gpu, "expert.fc2", experts, rows, h, width),
           compute._mem(gpu, "expert.activation.bwd", 1.5 * act_bytes),
           *_grouped_backward(gpu, "expert.fc1", experts, rows, up, h),
           compute._mem(gpu, "permute.bwd", 2 * routed * s.etp), *compute._linear_backward(gpu, "router", tokens_in,
                                                                                           model.experts, h)]
    if model.shared_experts:
        # DeepSeekMoE (arXiv 2401.06066) §3.2: shared experts are a dense MLP of shared·moe_ffn on every token,
        # column/row-parallel over TP (Megatron-Core SharedExpertMLP)
        tokens = s.micro_batch * model.seq_len // s.cp
        sw = model.shared_experts * model.moe_ffn_hidden // t
        sup = (2 if model.gated else 1) * sw
        sact = BF16 * tokens * sw * (3 if model.gated else 2)
        fwd += [compute._gemm(gpu, "shared.fc1", tokens, sup, h), compute._mem(gpu, "shared.activation", sact),
                compute._gemm(gpu, "shared.fc2", tokens, h, sw)]
        bwd += [*compute._linear_backward(gpu, "shared.fc2", tokens, h, sw),
                compute._mem(gpu, "shared.activation.bwd", 1.5 * sact),
                *compute._linear_backward(gpu, "shared.fc1", tokens, sup, h)]
    forward = attn_f + tuple(fwd)
    backward = tuple(bwd) + attn_b
    # TP collectives: the attention block's (two, four with SP) and the shared experts' pair; over the expert-TP
    # group, the all-gather of dispatched tokens and reduce-scatter of their outputs (Megatron-Core alltoall
    # dispatcher)
    coll = dense.forward_collectives
    if not model.shared_experts:
        coll = coll[:len(coll) // 2]
    etp = 0.0
    if s.etp > 1:
        shape = etp_shape(cluster, s)
        etp = (network.all_gather(cluster, shape, routed * s.etp)
               + network.reduce_scatter(cluster, shape, routed * s.etp))
    lay = LayerCompute(forward=forward, backward=backward, recompute=_recompute(s, cluster, forward, core),
                       forward_collectives=coll, backward_collectives=coll,
                       recompute_collectives=coll if s.recompute == "full" else (), attention_forward=core.seconds)
    # dispatch and combine: one all-to-all each way per pass (Lepikhin et al. 2020, GShard §3.2)
    a2a = 2 * all_to_all_time(cluster, s, dispatch_bytes(model, s)) if s.ep > 1 else 0.0
    return MoELayer(compute=lay, a2a_forward=a2a, etp_forward=etp)


def layer_key(s: Strategy) -> Strategy:
    """The fields of ``s`` a layer's cost reads (so that plans differing elsewhere share the cached layer)."""
    return Strategy(tp=s.tp, cp=s.cp, sequence_parallel=s.sequence_parallel, micro_batch=s.micro_batch,
                    recompute=s.recompute, ep=s.ep, etp=s.etp)
