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

from autoplan.hardware import compute, network, policy

from autoplan.families.transformer import layer, router
from autoplan.families.transformer.memory import wgrad_bytes
from autoplan.families.transformer.fp8_scaling import fp8_copies
from autoplan.hardware.compute import BF16, FP8, Op
from autoplan.families.transformer.layer import LayerCompute
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

LOAD_IMBALANCE = 1.15
"""Tokens of the busiest expert over the mean with auxiliary-loss balancing: every EP rank waits for the busiest
one. Fedus et al. 2021 (Switch Transformer, arXiv 2101.03961) §2.2 train with capacity factors 1.0-1.25 and drop
under 1 % of tokens at 1.25, so the busiest expert holds about 1.1-1.2× the mean; a model-level constant, not fitted
to any run. A model's ``capacity_factor`` > 0 caps it (tokens above capacity are dropped)."""

_DENSE_MLP = frozenset({"fc1", "activation", "fc2"})
_MHA = frozenset({"qkv", "proj", "attention"})
"""Kernels of the dense layer's MLP and attention, by the name before the first dot (their backward and FP8
quantizing passes share it)."""

FP8_TILE = 128
"""Values per FP8 scale of DeepSeek-V3's activation quantization: 1×128 tiles, one fp32 scale each (arXiv
2412.19437 §3.3.2, fine-grained quantization)."""

RECOMPUTED_MODULES = frozenset({"norm1", "norm2", "kv_up", "q_up", "kv_up.quantize", "q_up.quantize",
                                "expert.activation", "shared.activation"})
"""What ``recompute modules`` runs again before the backward: the norms, MLA's up-projections and the experts'
SwiGLU (DeepSeek-V3 §3.3.3, "Recomputation of RMSNorm and MLA Up-Projection", and "Low-Precision Storage":
the SwiGLU output is recomputed; Megatron-Core --recompute-modules layernorm mla_up_proj moe_act)."""


def imbalance(model: ModelSpec) -> float:
    """The busiest expert's tokens over the mean (the capacity factor when it caps the load)."""
    # Fedus et al. 2021 §2.1: expert capacity = capacity factor × tokens·top_k / experts
    return min(LOAD_IMBALANCE, model.capacity_factor) if model.capacity_factor else LOAD_IMBALANCE


def local_tokens(model: ModelSpec, s: Plan) -> int:
    """Tokens one GPU routes per micro-batch: its s/cp share, split over TP by sequence parallelism."""
    # Megatron-Core MoE README: with tp > 1 and ep > 1 sequence parallelism is required; tokens reach the router
    # sequence-sharded (Korthikanti et al. 2022 §4.2.2)
    return s.micro_batch * (model.seq_len // s.cp) // (s.tp if s.sequence_parallel else 1)


def expert_rows(model: ModelSpec, s: Plan) -> int:
    """Tokens the busiest local expert computes per micro-batch (the grouped GEMM's m per expert)."""
    # the ep·etp GPUs of one expert group route ep·etp·T·top_k tokens over the experts; each expert TP rank sees
    # all of its experts' tokens (all-gather over etp), at the busiest expert's load (imbalance)
    mean = s.ep * s.etp * local_tokens(model, s) * model.top_k / model.experts
    return max(1, math.ceil(mean * imbalance(model)))


def fp8(s: Plan) -> bool:
    """Whether the plan's linear layers (MLA projections, experts, shared experts) run FP8 GEMMs."""
    return s.precision != "bf16"


def dispatch_value_bytes(s: Plan) -> float:
    """Bytes per value the dispatch all-to-all moves: FP8 and its tile scales with an FP8 dispatch, else BF16."""
    # DeepSeek-V3 §3.3.3 (low-precision communication): activations are quantized to FP8 (1×128 tiles, an fp32
    # scale each) before the dispatch, the input of the experts' up-projection; the combine stays BF16
    return FP8 + 4 / FP8_TILE if s.deepseek_fp8 else BF16


def routed_bytes(model: ModelSpec, s: Plan, value_bytes: float) -> float:
    """Bytes of one GPU's T·top_k routed token copies of h values."""
    return value_bytes * local_tokens(model, s) * model.top_k * model.hidden


def dispatch_bytes(model: ModelSpec, s: Plan) -> float:
    """Bytes one GPU holds for the dispatch all-to-all: its T·top_k token copies of h values (FP8 with an FP8
    dispatch, else bf16)."""
    # Megatron-Core alltoall dispatcher: every routed copy is sent (to itself when its expert is local); the
    # (ep−1)/ep that leave the GPU are what network.all_to_all prices (Lepikhin et al. 2020, GShard §3.2)
    return routed_bytes(model, s, dispatch_value_bytes(s))


def combine_bytes(model: ModelSpec, s: Plan) -> float:
    """Bytes one GPU holds for the combine all-to-all: the experts' outputs for its copies, in BF16 (§3.3.3)."""
    return routed_bytes(model, s, BF16)


def a2a_bytes_leaving(model: ModelSpec, s: Plan) -> float:
    """Bytes one GPU sends to other EP ranks per dispatch (and receives per combine), without node-limited
    routing: tokens·top_k·h·value bytes·(ep−1)/ep."""
    return dispatch_bytes(model, s) * (s.ep - 1) / s.ep


def inter_node_copies(model: ModelSpec, shape: network.GroupShape) -> float:
    """Mean copies of one token that cross the inter-node network per dispatch over an EP group of ``shape``.

    Unlimited routing: each of the top_k copies travels alone and (n − k)/n of them land off the node (k ranks
    per node, uniform experts). Node-limited (``route_nodes`` M > 0): a token reaches at most min(M, top_k,
    nodes) nodes and crosses to each once, the source node being one of them with chance 1/nodes."""
    if shape.nodes <= 1:
        return 0.0
    if not model.route_nodes:
        # pairwise all-to-all (Thakur et al. 2005): the share of peers outside the node
        return model.top_k * (shape.size - shape.per_node) / shape.size
    # DeepSeek-V3 §2.1.2 (node-limited routing) and §3.2.2: one IB transfer per target node, then NVLink
    reached = min(model.route_nodes, model.top_k, shape.nodes)
    return reached * (shape.nodes - 1) / shape.nodes


def remote_nodes_reached(model: ModelSpec, shape: network.GroupShape) -> float:
    """Mean number of other nodes of an EP group of ``shape`` that hold at least one of a token's top_k experts,
    the experts spread evenly over the nodes and chosen uniformly without replacement: each other node is missed
    with chance C(E − E/n, k) / C(E, k) (the hypergeometric zero count)."""
    if shape.nodes <= 1:
        return 0.0
    experts, k = model.experts, model.top_k
    missed = math.comb(experts - experts // shape.nodes, k) / math.comb(experts, k)
    return (shape.nodes - 1) * (1.0 - missed)


def routed_a2a_time(model: ModelSpec, cluster: ClusterSpec, s: Plan, value_bytes: float) -> float:
    """Seconds of one dispatch or combine all-to-all moving one GPU's routed copies at ``value_bytes`` a value."""
    shape = ep_shape(cluster, s)
    nbytes = routed_bytes(model, s, value_bytes)
    flex = s.moe_dispatcher == "flex"
    if not (model.route_nodes or flex) or shape.nodes <= 1:
        return network.all_to_all(cluster, shape, nbytes)
    # DeepSeek-V3 §3.2.2 (DeepEP; HybridEP's hierarchical dispatch the same): a token goes over IB once per target
    # node to the GPU of the same local index there, which forwards it over NVLink to the GPUs of its experts; of
    # the top_k copies, (k − 1)/k end on another GPU of their node than the one they arrive at (or leave from)
    per_copy = value_bytes * local_tokens(model, s) * model.hidden
    inter = per_copy * (inter_node_copies(model, shape) if model.route_nodes else remote_nodes_reached(model, shape))
    intra = nbytes * (shape.per_node - 1) / shape.per_node
    return network.two_hop_all_to_all(cluster, shape, inter, intra)


def ep_shape(cluster: ClusterSpec, s: Plan) -> network.GroupShape:
    """Where an EP group sits: ep ranks etp apart (Megatron-Core expert rank order etp-ep-edp-pp)."""
    return network.group_shape(cluster.domain_gpus, s.ep, s.etp)


def etp_shape(cluster: ClusterSpec, s: Plan) -> network.GroupShape:
    """Where an expert-TP group sits: etp consecutive ranks."""
    return network.group_shape(cluster.domain_gpus, s.etp, 1)


def edp_shape(cluster: ClusterSpec, s: Plan) -> network.GroupShape:
    """Where an expert-data-parallel group sits: edp ranks ep·etp apart."""
    return network.group_shape(cluster.domain_gpus, s.edp, s.ep * s.etp)


def all_to_all_time(cluster: ClusterSpec, s: Plan, nbytes: float) -> float:
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
    split_host: tuple[float, float] = (0.0, 0.0)
    """Under a schedule that splits the backward: what the host waits add to the whole backward's (B's and W's
    each against its own kernels, at least the whole's), and the W part's own wait."""


def grouped_gemm_time(gpu, experts: int, m: int, n: int, k: int, fp8: bool = False,
                      out_bytes: float = BF16) -> float:
    """Seconds of one grouped GEMM over ``experts`` local experts of m tokens each: (m×k)·(k×n) per expert.

    Megatron-Core's --moe-grouped-gemm runs Transformer Engine's GroupedLinear, which on Hopper issues one cuBLAS
    GEMM per expert (TE ``general_grouped_gemm`` → ``nvte_multi_stream_cublas_gemm``): each expert's GEMM pays its
    own wave quantization, main-loop fill and launch (``compute.gemm_time``), so the grouped GEMM runs below a dense
    GEMM of the same FLOPs when m (tokens per expert) is small, and as the dense GEMMs when m is large (MegaBlocks,
    Gale et al. 2022, arXiv 2211.15841 §5: per-expert GEMM efficiency grows with tokens per expert)."""
    return experts * compute.gemm_time(gpu, m, n, k, 1, fp8, out_bytes)


def grouped_gemm_efficiency(gpu, experts: int, m: int, n: int, k: int, fp8: bool = False) -> float:
    """Achieved FLOP/s of the grouped GEMM over the GPU's peak (BF16, or FP8 with ``fp8``)."""
    peak = gpu.fp8_peak_flops if fp8 else gpu.peak_flops
    return 2.0 * experts * m * n * k / grouped_gemm_time(gpu, experts, m, n, k, fp8) / peak


def _grouped(gpu, name: str, experts: int, m: int, n: int, k: int, fp8: bool = False,
             out_bytes: float = BF16) -> Op:
    # the local experts' GEMMs of the busiest expert's m tokens each (the slowest expert sets the time)
    operand = compute.FP8 if fp8 else BF16
    return Op(name, 2.0 * m * n * k * experts, experts * (operand * (m * k + k * n) + out_bytes * m * n),
              grouped_gemm_time(gpu, experts, m, n, k, fp8, out_bytes))


def _grouped_backward(gpu, name: str, experts: int, m: int, n: int, k: int, fp8: bool = False,
                      wgrad: float = BF16) -> tuple[Op, Op]:
    # dgrad (m×n)·(n×k) and wgrad (k×m)·(m×n) per expert (Narayanan et al. SC'21 §5.1); ``wgrad``: wgrad_bytes
    return (_grouped(gpu, f"{name}.dgrad", experts, m, k, n, fp8),
            _grouped(gpu, f"{name}.wgrad", experts, k, n, m, fp8, wgrad))


def activation_ops(model: ModelSpec, gpu, values: int) -> tuple[Op, Op, int, int]:
    """Forward and backward of the experts' activation over ``values`` fc1 outputs, and their kernel counts.

    A gated unit reads gate and up and writes one (Shazeer 2020, arXiv 2002.05202): 1.5 bytes-of-fc1-output forward
    (an ungated one 2), 1.5× that backward. GPT-OSS's clamped SwiGLU (Megatron-Core ``weighted_bias_quick_geglu_impl`` with a
    ``clamp_value``) first clamps gate and linear halves (two kernels, read and write each) and concatenates them (a
    third, read and write), then runs the fused unit; its backward adds the two clamps' masked gradients."""
    full = BF16 * values                       # bytes of fc1's output (gate and linear halves)
    gated_fwd = full * (1.5 if model.gated else 2.0)     # an ungated unit reads its input and writes one
    if not model.glu_clamp:
        return (compute.memory_op(gpu, "expert.activation", gated_fwd), compute.memory_op(gpu, "expert.activation.bwd",
                                                                                 1.5 * gated_fwd), 1, 1)
    # clamps: read+write each half (2·full); cat: read+write full (2·full); fused unit: read full, write half
    fwd = 2 * full + 2 * full + 1.5 * full
    # fused backward: read grad (half) and input (full), write grad (full); each clamp's backward: read grad and
    # input, write grad (3 halves each)
    bwd = 2.5 * full + 2 * 1.5 * full
    return (compute.memory_op(gpu, "expert.activation", fwd, 4), compute.memory_op(gpu, "expert.activation.bwd", bwd, 3), 4, 3)


def _linear(gpu, name: str, m: int, n: int, k: int, fp8: bool, current: bool = False,
            copies: int = 2) -> tuple[Op, ...]:
    """A linear layer's forward: its FP8 input cast (when FP8, ``copies``: ``fp8_copies``) and its GEMM."""
    # no TP amax all-reduce under current scaling: this model leaves it out of MLA's projections
    cast = (layer.quantize_op(gpu, f"{name}.quantize", m * k, current, copies=copies),) if fp8 else ()
    return (*cast, compute.gemm_op(gpu, name, m, n, k, fp8=fp8))


def _linear_bwd(gpu, name: str, m: int, n: int, k: int, fp8: bool, current: bool = False,
                wgrad: float = BF16, copies: int = 2) -> tuple[Op, ...]:
    """A linear layer's backward: the FP8 cast of its output gradient (when FP8), dgrad and wgrad."""
    cast = (layer.quantize_op(gpu, f"{name}.quantize_grad", m * n, current, copies=copies),) if fp8 else ()
    return (*cast, *compute.linear_backward(gpu, name, m, n, k, fp8=fp8, wgrad_bytes=wgrad))


def _mla_ops(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """Forward and backward kernels of multi-head latent attention (projections and core)."""
    gpu, h, t, a = layer.fp8_gemm_gpu(cluster.gpu, s.precision, s.deepseek_fp8), model.hidden, s.tp, model.heads
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
    # DeepSeek-V3 §3.3.1: every linear layer runs FP8 GEMMs under an FP8 precision (the core stays BF16)
    f8, current, copies = fp8(s), s.precision == "fp8-current", fp8_copies(gpu, s.precision)
    fwd = [op for name, m, n, k in shapes for op in _linear(gpu, name, m, n, k, f8, current, copies)]
    bwd = [op for name, m, n, k in shapes
           for op in _linear_bwd(gpu, name, m, n, k, f8, current, wgrad_bytes(s), copies)]
    # the core: QK^T over d + d_R, AV over d_v; FLOPs as heads of their mean width (attention_core_dim)
    proxy = replace(model, head_dim=model.attention_core_dim // model.heads, kv_lora_rank=0, q_lora_rank=0,
                    qk_rope_head_dim=0, v_head_dim=0, experts=0, top_k=0, moe_ffn_hidden=0, shared_experts=0,
                    dense_layers=0, route_nodes=0, family="dense")
    core_f, core_b = layer.attention_ops(cluster, proxy, s.micro_batch, model.seq_len // s.cp, model.seq_len,
                                        a // t, model.dropout, fp8=s.fp8_attention)
    return (*fwd, core_f), (*bwd, core_b)


def _attention_ops(model: ModelSpec, cluster: ClusterSpec, s: Plan, dense: LayerCompute,
                   keep_mlp: bool) -> tuple[tuple[Op, ...], tuple[Op, ...], Op]:
    """The dense layer's kernels with MLA in place of its attention (when the model has it) and without the dense
    MLP unless ``keep_mlp``; and the attention core's forward."""
    drop = set() if keep_mlp else set(_DENSE_MLP)
    if model.mla:
        drop |= _MHA
    fwd = tuple(op for op in dense.forward if op.name.split(".")[0] not in drop)
    bwd = tuple(op for op in dense.backward if op.name.split(".")[0] not in drop)
    core = next(op for op in dense.forward if op.name.startswith("attention"))
    if model.mla:
        mla_f, mla_b = _mla_ops(model, cluster, s)
        fwd, bwd, core = fwd + mla_f, bwd + mla_b, mla_f[-1]
    return fwd, bwd, core


def _recompute(s: Plan, cluster: ClusterSpec, forward: tuple[Op, ...], core: Op) -> tuple[Op, ...]:
    # Korthikanti et al. 2022 §4.2: selective recomputes the attention core, full recomputes the whole layer
    if s.recompute == "full":
        return forward
    if s.recompute == "selective" and not cluster.flash_attention:
        return (core,)
    if s.recompute == "modules":
        return tuple(op for op in forward if op.name in RECOMPUTED_MODULES)
    return ()


@lru_cache(maxsize=4096)
def dense_layer(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> LayerCompute:
    """One dense-FFN layer of a MoE model (its leading ``dense_layers``), with MLA when the model has it."""
    dense = layer.layer_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch, s.recompute,
                                s.precision, s.fp8_activation_store, s.deepseek_fp8, wgrad_bytes(s),
                                s.fp8_attention)
    if not model.mla:
        return replace(dense, recompute=_recompute(s, cluster, dense.forward, dense.forward[0])) if (
            s.recompute == "modules") else dense
    fwd, bwd, core = _attention_ops(model, cluster, s, dense, keep_mlp=True)
    rec = _recompute(s, cluster, fwd, core)
    return replace(dense, forward=fwd, backward=bwd, recompute=rec, attention_forward=core.seconds)


Launched = list[tuple[Op, float]]
"""Kernels in issue order, each with the launches it costs the host (a grouped GEMM one per local expert; the
combined 1F1B's schedule nodes their launch-equivalents, COMBINED_1F1B_NODE_LAUNCHES)."""

COMBINED_1F1B_NODES = (4, 6)
"""Schedule nodes Megatron-Core's combined 1F1B (``--overlap-moe-expert-parallel-comm``) calls per layer in the
forward and the backward (models/common/model_chunk_schedule_plan.py ``TransformerLayerSchedulePlan.run``: attn,
moe_dispatch, mlp, moe_combine forward; moe_combine, mlp, mlp backward_dw, moe_dispatch, attn, attn backward_dw
backward), each a Python call that switches streams, waits and records an event and, backward, enters the autograd
engine once (pipeline_parallel/utils.py ``ScheduleNode``)."""

COMBINED_1F1B_NODE_LAUNCHES = 3.62
"""Host time of one schedule node, in the GPU's ``host_launch`` units (its host's seconds per modelled op), so that it
scales with the host. Calibrated on a measured pair outside validate: Megatron-Bridge PR #1760 (a6e92de5f) turned
``moe_a2a_overlap`` off on 64 DGX B200s (Qwen3 235B-A22B BF16, PP 8, VP 4, EP 8) "due to CPU overhead", 17.2 s a
step with it and 16.0 s without; bisected so that autoplan's with/without ratio equals 17.2 / 16.0
(benchmarks/bench_ep_overlap.py, which also checks the PR's MXFP8 pair; 3.29 before the B200's NVLink tier and host
time were measured again). Under a full-iteration CUDA graph the host issues nothing (graphs.graphed), so the nodes
cost nothing there."""


def _routed_experts(model: ModelSpec, gpu, s: Plan) -> tuple[Launched, Launched]:
    """Forward (from the permutation after the dispatch to the unpermutation before the combine) and backward
    kernels of the routed experts, without the router's (``router.router_ops``)."""
    h = model.hidden
    fp8, cs = s.precision != "bf16", s.precision == "fp8-current"
    tokens_in = local_tokens(model, s)
    experts = model.experts // s.ep
    rows = expert_rows(model, s)
    width = model.moe_ffn_hidden // s.etp
    up = (2 if model.gated else 1) * width
    routed = BF16 * tokens_in * model.top_k * h
    # Megatron-Core permute/unpermute: gather each routed copy into expert order and back (read and write)
    permute = compute.memory_op(gpu, "permute", 2 * routed * s.etp)
    unpermute = compute.memory_op(gpu, "unpermute", 2 * routed * s.etp)
    # Megatron-Core alltoall dispatcher (token_dispatcher.py): with more than one local expert the gathered tokens
    # are sorted into local-expert order after the dispatch and back before the combine (sort_chunks_by_idxs; under
    # drop-and-pad a transpose copy), one copy of the permuted tokens each way, and one each in the backward. The
    # flex dispatcher has no such sort: DeepEP's output is permuted to expert order once, and HybridEP permutes
    # inside its dispatch (MoEFlexTokenDispatcher, _HybridEPManager.get_permuted_hidden_states_by_experts)
    sorts = experts > 1 and s.moe_dispatcher == "alltoall"
    sort, unsort = (compute.memory_op(gpu, name, 2 * routed * s.etp) for name in ("sort_chunks", "unsort_chunks"))
    act_f, act_b, act_fk, act_bk = activation_ops(model, gpu, experts * rows * up)
    store_f, store_b = layer.fp8_store_ops(gpu, "expert.activation", experts * rows * up, s.fp8_activation_store)
    fc1 = _grouped(gpu, "expert.fc1", experts, rows, up, h, fp8)
    fc2 = _grouped(gpu, "expert.fc2", experts, rows, h, width, fp8)
    # with an FP8 dispatch the tokens are cast before it (T·h values, not the T·top_k copies: DeepSeek-V3 §3.3.3)
    fc1_cast = tokens_in * h if s.deepseek_fp8 else experts * rows * h
    # (DeepSeek-V3's own stack, with its FP8 dispatch, runs no Transformer Engine padding)
    pad_f, pad_b = _fp8_padding(model, gpu, experts, rows, h) if fp8 and not s.deepseek_fp8 else ([], [])

    def cast(name: str, values: float) -> Launched:
        # Transformer Engine's FP8 cast (when FP8); no TP amax all-reduce under current scaling: the experts'
        # grouped linears run with no TP mode (Megatron-Core TEGroupedLinear, explicit expert communication).
        # GroupedLinear casts its input and output gradient with ``split_quantize``: one fused multi-tensor cast
        # under delayed scaling, each local expert's rows cast on their own otherwise (TE v2.7-v2.12
        # pytorch/csrc/extensions/cast.cpp: "only have fused kernel for FP8 delayed scaling"); one call for the host
        return [(layer.quantize_op(gpu, name, values, cs, tensors=experts if cs else 1,
                                   copies=fp8_copies(gpu, s.precision)), 1)] if fp8 else []

    select_f, select_b = _masked_selects(model, gpu, tokens_in)
    bias_f, bias_b = fc2_bias_ops(model, gpu, experts, rows * h, 4 if s.moe_dispatcher == "flex" else BF16)
    # between the GEMMs: what the fused grouped MLP (Plan.fused_grouped_mlp) runs in their epilogues
    between_f = [(act_f, act_fk), *((op, 1) for op in store_f), *cast("expert.fc2.quantize", experts * rows * width)]
    forward = [(permute, 1), *select_f, *([(sort, 1)] if sorts else []), *pad_f[:1],
               *cast("expert.fc1.quantize", fc1_cast), (fc1, experts),
               *([] if s.fused_grouped_mlp else between_f), (fc2, experts),
               *([] if s.fused_grouped_mlp else bias_f), *pad_f[1:], *([(unsort, 1)] if sorts else []),
               (unpermute, 1)]
    wgrad = wgrad_bytes(s)
    fc2_d, fc2_w = _grouped_backward(gpu, "expert.fc2", experts, rows, h, width, fp8, wgrad)
    fc1_d, fc1_w = _grouped_backward(gpu, "expert.fc1", experts, rows, up, h, fp8, wgrad)
    sorts_b = [(compute.memory_op(gpu, f"{op.name}.bwd", op.bytes), 1) for op in (unsort, sort)] if sorts else []
    between_b = [*((op, 1) for op in store_b), (act_b, act_bk), *cast("expert.fc1.quantize_grad", experts * rows * up)]
    backward = [(compute.memory_op(gpu, "unpermute.bwd", 2 * routed * s.etp), 1), *sorts_b[:1], *pad_b[:1],
                *([] if s.fused_grouped_mlp else bias_b), *cast("expert.fc2.quantize_grad", experts * rows * h),
                (fc2_d, experts), (fc2_w, experts), *([] if s.fused_grouped_mlp else between_b),
                (fc1_d, experts), (fc1_w, experts), *pad_b[1:], *sorts_b[1:], *select_b,
                (compute.memory_op(gpu, "permute.bwd", 2 * routed * s.etp), 1)]
    return forward, backward


def fc2_bias_ops(model: ModelSpec, gpu, experts: int, values: int, probs_bytes: int) -> tuple[Launched, Launched]:
    """The experts' fc2 bias, weighted by each token's router probability, over ``values`` outputs per local expert
    (none without biases). ``probs_bytes``: 2 for the router's BF16 probabilities, 4 where the dispatcher takes
    FP32 ones (HybridEP and DeepEP cast them)."""
    if not model.bias:
        return [], []
    # Megatron-Core TEGroupedMLP._apply_bias (core 0.16-0.18, experts.py; fc2 built with skip_bias_add): in eager
    # PyTorch, per local expert t + b * p on the expert's rows, then torch.cat and .to(dtype): b * p writes a tensor
    # of the probabilities' type, the add reads t and it and writes the sum, the cat copies it, .to casts it back
    p, n = probs_bytes, experts * values
    cast = p + BF16 if p != BF16 else 0          # a pass between the probabilities' type and BF16 (none if the same)
    forward = (p + (BF16 + 2 * p) + 2 * p + cast) * n
    # autograd: the cast's backward (BF16 grad to p), the add's gradient back to t's type, and for b and p each a
    # product of the gradient and the other factor and its sum (over rows, over features)
    backward = (cast + cast + 2 * 3 * p) * n
    return ([(compute.memory_op(gpu, "expert.fc2.bias", forward, 2 * experts + 2), 1)],
            [(compute.memory_op(gpu, "expert.fc2.bias.bwd", backward, 4 * experts + 2), 1)])


MASKED_SELECT_KERNELS = (14, 5)
"""(forward, backward) small kernels Megatron-Core 0.10's padded permutation runs beyond 0.9's padded path
(``padded_permute_syncs``): permute's routing map transpose and ``arange`` and unpermute's two transposes, each around
a ``masked_select`` (about six: the boolean index's ``nonzero`` counts, copies the count to the host and selects);
backward ``MaskedSelectBackward``'s zero fill and ``masked_scatter`` (about four) and one more product (core_v0.10.0
moe_utils.permute/unpermute: 19 and 8 against core_v0.9.0's padded 5 and 3)."""


def _masked_selects(model: ModelSpec, gpu, tokens: int) -> tuple[Launched, Launched]:
    """The extra small kernels of Megatron-Core 0.10's padded permutation over [experts, tokens] maps (none
    otherwise), inside the permute and unpermute calls (no launch of their own for the host)."""
    if not (model.pad_to_capacity and model.padded_permute_syncs):
        return [], []
    scores = BF16 * tokens * model.experts
    fwd, bwd = MASKED_SELECT_KERNELS
    return ([(compute.memory_op(gpu, "permute.masked_select", fwd * scores, fwd), 0)],
            [(compute.memory_op(gpu, "permute.masked_select.bwd", bwd * scores, bwd), 0)])


FP8_ROW_ALIGN = 16
"""Rows per expert an FP8 grouped GEMM needs a multiple of (Transformer Engine ``Fp8Padding``'s default
``align_size``: Hopper FP8 GEMMs take m in multiples of 16)."""


def _fp8_padding(model: ModelSpec, gpu, experts: int, rows: int, h: int) -> tuple[Launched, Launched]:
    """Transformer Engine's Fp8Padding before the experts' fc1 and Fp8Unpadding after their fc2 (forward), and their
    backward copies, over ``experts`` local experts of ``rows`` rows of ``h`` values; none when every expert's row
    count is already aligned."""
    # Megatron-Core TEGroupedMLP (experts.py, core_r0.10 on): under FP8 the permuted rows of each local expert are
    # padded to the alignment before fc1 and the padding dropped after fc2, each a copy of the rows (read and
    # write), unless Megatron's router padding (--moe-router-padding-for-fp8) aligned the counts; with
    # pad-to-capacity or a force-balanced load every expert gets the same count, which needs no copy if aligned
    if (model.pad_to_capacity or imbalance(model) == 1.0) and rows % FP8_ROW_ALIGN == 0:
        return [], []
    pad, unpad = (compute.memory_op(gpu, f"expert.{name}", 2 * BF16 * experts * rows * h)
                  for name in ("fp8_padding", "fp8_unpadding"))
    back = [compute.memory_op(gpu, f"{op.name}.bwd", op.bytes) for op in (unpad, pad)]
    return [(pad, 1), (unpad, 1)], [(op, 1) for op in back]


def _shared_experts(model: ModelSpec, gpu, s: Plan) -> tuple[Launched, Launched]:
    """Forward and backward kernels of the shared experts (none without them)."""
    if not model.shared_experts:
        return [], []
    h, fp8 = model.hidden, s.precision != "bf16"
    # DeepSeekMoE (arXiv 2401.06066) §3.2: shared experts are a dense MLP of shared·moe_ffn on every token,
    # column/row-parallel over TP (Megatron-Core SharedExpertMLP)
    tokens = s.micro_batch * model.seq_len // s.cp
    sw = model.shared_experts * model.moe_ffn_hidden // s.tp
    sup = (2 if model.gated else 1) * sw
    sact = BF16 * tokens * sw * (3 if model.gated else 2)
    sstore_f, sstore_b = layer.fp8_store_ops(gpu, "shared.activation", tokens * sup, s.fp8_activation_store)
    forward = [(compute.gemm_op(gpu, "shared.fc1", tokens, sup, h, fp8=fp8), 1),
               (compute.memory_op(gpu, "shared.activation", sact), 1), *((op, 1) for op in sstore_f),
               (compute.gemm_op(gpu, "shared.fc2", tokens, h, sw, fp8=fp8), 1)]
    wgrad = wgrad_bytes(s)
    backward = [*((op, 1) for op in compute.linear_backward(gpu, "shared.fc2", tokens, h, sw, fp8, wgrad)),
                *((op, 1) for op in sstore_b), (compute.memory_op(gpu, "shared.activation.bwd", 1.5 * sact), 1),
                *((op, 1) for op in compute.linear_backward(gpu, "shared.fc1", tokens, sup, h, fp8, wgrad))]
    return forward, backward


def _host_waits(model: ModelSpec, gpu, post_sync: Launched, backward: Launched, attn_f: tuple[Op, ...],
                attn_b: tuple[Op, ...], pre_sync: Launched, dispatch: float, combine: float,
                sync_free: bool = False, paired: bool = False) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """The GPU's waits for the host in the forward and the backward (an empty tuple where it never waits);
    ``sync_free``: the token counts never reach the host (HybridEP feeding the fused grouped MLP); ``paired``:
    the layer runs as Megatron-Core's combined 1F1B schedule nodes (``Plan.ep_overlap``)."""
    schedule_f, schedule_b = ([(Op(name, 0.0, 0.0, 0.0), nodes * COMBINED_1F1B_NODE_LAUNCHES)] if paired else []
                              for name, nodes in zip(("schedule_nodes", "schedule_nodes.bwd"), COMBINED_1F1B_NODES))
    # the host's issue time: from the dispatcher's sync through the experts (the all-to-alls on the GPU's queue
    # between them) and the next layer's attention and router, to the next sync
    span = [*schedule_f, post_sync[0], (Op("all_to_all", 0.0, 0.0, dispatch), 1), *post_sync[1:],
            (Op("all_to_all", 0.0, 0.0, combine), 1), *((op, 1) for op in attn_f), *pre_sync]
    # Megatron-Core token_dispatcher.py (MoEAlltoAllTokenDispatcher): drop-and-pad keeps cuda_sync_point "no_sync"
    # (the split sizes are the capacity, a host value); dropless routing syncs the host every layer, and so does
    # 0.10's padded permutation (ModelSpec.padded_permute_syncs)
    synced = not sync_free and (not model.pad_to_capacity or model.padded_permute_syncs)
    wait_f = compute.host_exposed(gpu.host_launch, span, synced=synced)
    wait_b = compute.host_exposed(gpu.host_launch, [*schedule_b, *backward, *((op, 1) for op in attn_b)],
                                  synced=False)
    return ((Op("host.wait", 0.0, 0.0, wait_f),) if wait_f else (),
            (Op("host.wait.bwd", 0.0, 0.0, wait_b),) if wait_b else ())


def _split_host(gpu, backward: Launched, attn_b: tuple[Op, ...], whole: float) -> tuple[float, float]:
    """``MoELayer.split_host``: a split backward's B (input gradients) and W (weight gradients) are issued apart,
    each raced by the host against its own kernels (Qi et al. 2024 §2: W runs later, in the bubbles)."""
    ops = [*backward, *((op, 1) for op in attn_b)]
    w = [(op, n) for op, n in ops if layer.is_weight_grad(op)]
    b = [(op, n) for op, n in ops if not layer.is_weight_grad(op)]
    wait_w = compute.host_exposed(gpu.host_launch, w, synced=False)
    wait_b = compute.host_exposed(gpu.host_launch, b, synced=False)
    return wait_b + wait_w - whole, wait_w


def _expert_tp_seconds(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """Forward seconds of the expert-TP all-gather of the dispatched tokens and reduce-scatter of the experts'
    outputs (Megatron-Core alltoall dispatcher, over the expert-TP group; 0 if etp = 1)."""
    if s.etp <= 1:
        return 0.0
    shape = etp_shape(cluster, s)
    gathered = BF16 * local_tokens(model, s) * model.top_k * model.hidden * s.etp
    return (policy.all_gather(cluster, shape, gathered, s.collective_policy)
            + policy.reduce_scatter(cluster, shape, gathered, s.collective_policy))


@lru_cache(maxsize=4096)
def moe_layer(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> MoELayer:
    """One MoE layer for one micro-batch on one GPU: attention, router, dispatch, experts, combine, shared experts."""
    gpu = layer.fp8_gemm_gpu(cluster.gpu, s.precision, s.deepseek_fp8)
    dense = layer.layer_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch, s.recompute,
                                s.precision, s.fp8_activation_store, s.deepseek_fp8, wgrad_bytes(s),
                                s.fp8_attention)
    attn_f, attn_b, core = _attention_ops(model, cluster, s, dense, keep_mlp=False)
    pre_sync, router_b = router.router_ops(model, cluster, s, gpu, local_tokens(model, s), wgrad_bytes(s))
    routed_f, routed_b = _routed_experts(model, gpu, s)
    shared_f, shared_b = _shared_experts(model, gpu, s)
    post_sync, backward_ops = routed_f + shared_f, routed_b + router_b + shared_b
    # dispatch and combine: one all-to-all each way per pass (Lepikhin et al. 2020, GShard §3.2); the dispatch
    # in FP8 with an FP8 dispatch, the combine in BF16 (DeepSeek-V3 §3.3.3; the backward mirrors them: the
    # gradient sent to the experts in FP8, the one sent back in BF16)
    dispatch = routed_a2a_time(model, cluster, s, dispatch_value_bytes(s)) if s.ep > 1 else 0.0
    combine = routed_a2a_time(model, cluster, s, BF16) if s.ep > 1 else 0.0
    host, host_b = _host_waits(model, gpu, post_sync, backward_ops, attn_f, attn_b, pre_sync, dispatch, combine,
                               sync_free=s.fused_grouped_mlp and s.moe_dispatcher == "flex", paired=s.ep_overlap)
    split_host = _split_host(gpu, backward_ops, attn_b, sum(op.seconds for op in host_b))
    forward = attn_f + tuple(op for op, _ in pre_sync + post_sync) + host
    backward = tuple(op for op, _ in backward_ops) + attn_b + host_b
    # TP collectives: the attention block's (two, four with SP) and the shared experts' pair
    coll = dense.forward_collectives
    if not model.shared_experts:
        coll = coll[:len(coll) // 2]
    # the backward re-gathers the inputs of the column-parallel QKV (and the shared experts' fc1) for their wgrad
    regather = layer.sp_regathers(s.tp, s.sequence_parallel, coll[0].nbytes if coll else 0,
                                  2 if model.shared_experts else 1)
    lay = LayerCompute(forward=forward, backward=backward, recompute=_recompute(s, cluster, forward, core),
                       forward_collectives=coll, backward_collectives=coll + regather,
                       recompute_collectives=coll if s.recompute == "full" else (), attention_forward=core.seconds)
    return MoELayer(compute=lay, a2a_forward=dispatch + combine, etp_forward=_expert_tp_seconds(model, cluster, s),
                    split_host=split_host)


LAYER_FIELDS = ("tp", "cp", "sequence_parallel", "micro_batch", "recompute", "ep", "etp", "moe_dispatcher",
                "ep_overlap", "precision", "fp8_activation_store", "deepseek_fp8", "fused_grouped_mlp", "fp8_attention",
                "collective_policy", "gradient_accumulation_fusion", "grad_reduce_in_fp32")
"""The fields of a plan a layer's cost reads."""


def layer_key(s: Plan) -> Plan:
    """``s`` with only the LAYER_FIELDS set (so that plans differing elsewhere share the cached layer)."""
    return type(s)(**{f: getattr(s, f) for f in LAYER_FIELDS})
