"""Seconds of one chunk pass of a dense transformer (its layers, embedding, output layer, TP collectives,
context-parallel ring exchanges and unfused gradient accumulation) on one GPU."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from autoplan.hardware import compute, network, policy

from autoplan.families.transformer import layer as kernels
from autoplan.families.transformer import memory
from autoplan.families.transformer.memory import grad_bytes, wgrad_bytes  # noqa: F401  (step.py, moe.py read it)
from autoplan.families.transformer.knobs import fused_loss, recomputed_layers
from autoplan.families.transformer import tp_overlap
from autoplan.hardware.compute import Collective, Op
from autoplan.families.transformer.layer import LayerCompute
from autoplan.families.transformer.graphs import under_graphs
from autoplan.families.costs import PassCost, PassKey, host_bound, pass_cost
from autoplan.specs.cluster import ClusterSpec
from autoplan.hardware.support import cp_a2a_degree
from autoplan.specs.model import ModelSpec
from autoplan.specs.layout import chunk_layers, holds_output
from autoplan.specs.plan import FUSED_PAIRS, Plan

CP_BACKWARD_FACTOR = 2.5
"""Attention backward over forward that a CP ring's two backward exchanges overlap with (Dao 2023, FA2 §3)."""


def cp_kv_bytes(model: ModelSpec, s: Plan) -> int:
    """Bytes of one K/V block a CP rank passes around the ring per layer."""
    # ring attention (Liu et al. 2023 §3): K and V of the rank's s/cp tokens, bf16, its tp share of kv heads; MLA's
    # keys carry the decoupled RoPE part too (DeepSeek-V2, arXiv 2405.04434 §2.1.3: d_h + d_h^R per key head)
    return compute.BF16 * s.micro_batch * (model.seq_len // s.cp) * _kv_width(model) // s.tp


def _kv_width(model: ModelSpec) -> int:
    """Width of one token's key plus value across the kv heads."""
    return model.kv_heads * (model.qk_head_dim + model.value_dim)


def _cp_ring(model: ModelSpec, cluster: ClusterSpec, s: Plan, attention_forward: float) -> tuple[float, float]:
    """Seconds one layer's context parallelism adds to the forward and the backward pass: its exchanges where they
    are exposed (a ring of K/V blocks, Ulysses all-to-alls, or all-to-alls inside the node and a ring across:
    ``cp_comm``) and a ring's merges of its partial results (``layer.cp_ring_merge_ops``)."""
    if s.cp == 1:
        return 0.0, 0.0
    a2a = cp_a2a_degree(s, cluster.domain_gpus)
    fwd = bwd = ulysses_seconds(model, cluster, s, a2a) if a2a > 1 else 0.0
    ring = s.cp // a2a
    if ring == 1:
        return fwd, bwd
    kv = cp_kv_bytes(model, s)
    merge_f, merge_b = _ring_merges(model, cluster, s, ring, kv)
    fwd += merge_f
    bwd += merge_b
    shape = network.shape_of(cluster, s, "cp")
    # a hierarchical ring's neighbours are whole a2a groups apart: across nodes unless the group fits in one
    same_node = shape.nodes == 1
    hop = network.send_recv(cluster, same_node, kv)
    # ring attention (Liu et al. 2023): r−1 K/V block exchanges overlap the blockwise attention compute;
    # the backward sends K/V and their gradients (2×) beside a 2.5× attention backward (Dao 2023, FA2 §3)
    fwd += max(0.0, (ring - 1) * hop - attention_forward * (ring - 1) / ring) + hop / ring
    bwd += max(0.0, 2 * (ring - 1) * hop - CP_BACKWARD_FACTOR * attention_forward * (ring - 1) / ring) + hop / ring
    return fwd, bwd


def _ring_merges(model: ModelSpec, cluster: ClusterSpec, s: Plan, ring: int, kv_bytes: int) -> tuple[float, float]:
    """Seconds of a CP ring's merge kernels in one layer's forward and backward (the query, output and key-value
    values of a rank: s/cp tokens of its heads, whatever the all-to-alls moved)."""
    tokens = s.micro_batch * (model.seq_len // s.cp)
    heads = model.heads // s.tp
    fwd, bwd = kernels.cp_ring_merge_ops(cluster.gpu, tokens * heads * model.qk_head_dim,
                                         tokens * heads * model.value_dim, kv_bytes / compute.BF16, ring)
    return fwd.seconds, bwd.seconds


def ulysses_bytes(model: ModelSpec, s: Plan) -> tuple[int, int]:
    """Bytes per GPU of one Ulysses all-to-all of Q (or the attention output) and of K (or V), the mean of the
    two where their head widths differ (MLA)."""
    # Jacobs et al. 2023 (DeepSpeed-Ulysses, arXiv 2309.14509) §3: each all-to-all re-shards one b·(s/cp)·d
    # tensor of the rank's tp share of heads from a sequence split to a head split (and back for the output)
    tokens = s.micro_batch * (model.seq_len // s.cp)
    per_head = model.qk_head_dim + model.value_dim
    return (compute.BF16 * tokens * model.heads * per_head // 2 // s.tp,
            compute.BF16 * tokens * _kv_width(model) // 2 // s.tp)


def ulysses_seconds(model: ModelSpec, cluster: ClusterSpec, s: Plan, a2a: int) -> float:
    """Seconds of one layer's four Ulysses all-to-alls (Q, K, V in; the output back) over ``a2a`` CP ranks; the
    backward has four as well (the output's gradient in; those of Q, K and V back). They sit on the attention's
    critical path: nothing to overlap with."""
    q, kv = ulysses_bytes(model, s)
    shape = network.group_shape(cluster.domain_gpus, a2a, network.stride(s, "cp"))
    # Jacobs et al. 2023 §3: all-to-alls of Q, K, V before attention and of its output after it
    return 2 * network.all_to_all(cluster, shape, q) + 2 * network.all_to_all(cluster, shape, kv)


def _collectives_time(cluster: ClusterSpec, shape: network.GroupShape, colls: tuple[Collective, ...],
                      collective_policy: str = "nccl") -> float:
    # the plan's collective policy (nccl: network.py unchanged; baseline/Themis when the TP group spans dimensions)
    return sum(policy.COLLECTIVES[c.kind](cluster, shape, c.nbytes, collective_policy) for c in colls)


def layer(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> LayerCompute:
    """Kernels and TP collectives of one transformer layer for one micro-batch of plan ``s``."""
    return kernels.layer_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch, s.recompute,
                                 s.precision, s.fp8_activation_store, wgrad_bytes=wgrad_bytes(s),
                                 fp8_attention=s.fp8_attention)


NOT_READ = {"dp": 1, "global_batch": 1, "zero": 0, "overlap_grad_reduce": True, "overlap_param_gather": True,
            "overlap_p2p_comm": True, "embedding_wgrad_deferral": 0}
"""Plan fields a pass's seconds never read (a pass is one micro-batch through one chunk, before any DP collective
or pipeline transfer): plans that differ only there share one answer (tests/families/transformer check it)."""


def pass_key(s: Plan) -> Plan:
    """``s`` with the fields passes never read (``NOT_READ``) at fixed values: one key for the plans that share
    their passes."""
    return type(s).checked(s.values() | NOT_READ)


def pass_costs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> dict[PassKey, PassCost]:
    """Cost of a forward / backward chunk pass, keyed by (forward, holds embedding, holds output layer)."""
    return _pass_costs(model, cluster, pass_key(s))


LAYER_NOT_READ = NOT_READ | {"pp": 1, "schedule": "1f1b", "virtual_stages": 1, "first_stage_layers": 0,
                              "last_stage_layers": 0}
"""Plan fields one layer's (and the embedding's and output layer's) seconds never read besides ``NOT_READ``: the
pipeline layout only says how many layers a chunk holds (tests/families/transformer check it)."""


@lru_cache(maxsize=4096)
def _pass_costs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> dict[PassKey, PassCost]:
    (fwd, fwd_tp, bwd, bwd_tp, rec, rec_tp, cp_fwd, cp_bwd, emb_f, emb_b, out_f, out_b, emb_tp, out_tp,
     launches) = _layer_terms(model, cluster, type(s).checked(s.values() | LAYER_NOT_READ))
    launches_f, launches_b, launches_r, emb_f_n, out_f_n, emb_b_n, out_b_n = launches
    n_first, n_mid, n_last = chunk_layers(model.layers, s)
    # the host runs ahead of the GPU unless it is slower (costs.host_bound; GPUSpec.host_launch)
    host = cluster.gpu.host_launch
    costs = {}
    for first in (False, True):
        for last in (False, True):
            # an uneven first/last stage's outer chunk has its own layer count (Megatron-Core, uneven pipeline split)
            n = n_first if first else n_last if last else n_mid
            # a partial (block) recompute repeats only its first layers of the chunk (knobs.recomputed_layers)
            r = recomputed_layers(s, n) if s.recompute == "full" else n
            f_comp = n * fwd + first * emb_f + last * out_f
            f_tp = n * fwd_tp + first * emb_tp + last * out_tp
            f_host = host * (n * launches_f + first * emb_f_n + last * out_f_n)
            f_comp += _offload_wait(model, cluster, s, f_comp)
            costs[(True, first, last)] = host_bound(
                pass_cost(("compute", f_comp), ("tp", f_tp), ("cp", n * cp_fwd)), f_host)
            b_comp = n * bwd + first * emb_b + last * out_b
            if not s.gradient_accumulation_fusion:
                b_comp += grad_accumulation(model, cluster, s, n, first, last).seconds
            # Shoeybi et al. 2019 §3 (conjugate f and g): the backward has the forward's TP collectives; a full
            # recompute repeats the forward's too (Korthikanti et al. 2022 §4.2)
            b_comp += _offload_wait(model, cluster, s, b_comp)
            b_tp = n * bwd_tp + r * rec_tp + last * out_tp
            b_host = host * (n * launches_b + r * launches_r + first * emb_b_n + last * out_b_n)
            costs[(False, first, last)] = host_bound(pass_cost(
                ("compute", b_comp), ("recompute", r * rec), ("tp", b_tp),
                ("cp", n * cp_bwd + (r * cp_fwd if s.recompute == "full" else 0))), b_host)
    return costs


def layer_pass_seconds(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """Seconds one layer adds at least to a micro-batch's forward and backward passes on the compute stream: the
    per-layer terms ``_pass_costs`` sums, without the host floor, offload waits, gradient accumulation and a partial
    recompute's layers (each only adds); under DualPipe only its compute, which a fused pair cannot hide
    (``step._stage_passes``). Plans of one layer shape share it whatever their pipeline layout."""
    (fwd, fwd_tp, bwd, bwd_tp, rec, rec_tp, cp_fwd, cp_bwd, *_) = _layer_terms(
        model, cluster, type(s).checked(s.values() | LAYER_NOT_READ))
    again = not (s.recompute == "full" and s.recompute_layers)     # r = n in _pass_costs
    if s.schedule in FUSED_PAIRS:
        return fwd + bwd + (rec if again else 0.0)
    full = again and s.recompute == "full"
    return (fwd + fwd_tp + cp_fwd + bwd + bwd_tp + cp_bwd + (rec + rec_tp if again else 0.0)
            + (cp_fwd if full else 0.0))


@lru_cache(maxsize=1024)
def _layer_terms(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> tuple[float, ...]:
    """Seconds of one layer's forward, backward and recompute and of their TP collectives, of its CP exchanges,
    and of the embedding's and output layer's passes and TP collectives (plans of one layer shape share them)."""
    lay = layer(model, cluster, s)
    tp = network.shape_of(cluster, s, "tp")
    cp_fwd, cp_bwd = _cp_ring(model, cluster, s, lay.attention_forward)
    fwd = LayerCompute.seconds(lay.forward)
    fwd_tp = _collectives_time(cluster, tp, lay.forward_collectives, s.collective_policy)
    bwd = LayerCompute.seconds(lay.backward)
    bwd_tp = _collectives_time(cluster, tp, lay.backward_collectives, s.collective_policy)
    rec = LayerCompute.seconds(lay.recompute)
    rec_tp = _collectives_time(cluster, tp, lay.recompute_collectives, s.collective_policy)
    if s.tp_comm_overlap and s.sequence_parallel and s.tp > 1:
        # chunked collectives hidden behind the GEMMs they feed (Wang et al. ASPLOS'23; TE userbuffers)
        fwd_tp, bwd_tp = tp_overlap.layer_exposed(model, cluster, s)
        rec_tp = fwd_tp if lay.recompute_collectives else 0.0
    emb_f, emb_b, emb_c = kernels.embedding_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch,
                                                    grad_bytes(s))
    out_f, out_b, out_c = kernels.output_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch,
                                                 fused_loss(s), wgrad_bytes(s), s.fp8_output_layer)
    emb_tp = _collectives_time(cluster, tp, emb_c, s.collective_policy)
    out_tp = _collectives_time(cluster, tp, out_c, s.collective_policy)
    # the host issues every kernel and NCCL call of a pass (one modelled op each): launches per layer's forward,
    # backward and recompute, and the embedding's and output layer's (costs.host_bound; GPUSpec.host_launch)
    launches = (len(lay.forward) + len(lay.forward_collectives), len(lay.backward) + len(lay.backward_collectives),
                len(lay.recompute) + len(lay.recompute_collectives), len(emb_f) + len(emb_c),
                len(out_f) + len(out_c), len(emb_b), len(out_b) + len(out_c))
    return (fwd, fwd_tp, bwd, bwd_tp, rec, rec_tp, cp_fwd, cp_bwd, LayerCompute.seconds(emb_f),
            LayerCompute.seconds(emb_b), LayerCompute.seconds(out_f), LayerCompute.seconds(out_b), emb_tp, out_tp,
            launches)


def _offload_wait(model: ModelSpec, cluster: ClusterSpec, s: Plan, compute_seconds: float) -> float:
    """Seconds a pass waits for its offloaded activations: their copy over the host link (to the host after the
    forward, back before the backward), asynchronous beside the pass's compute, shows where it is longer."""
    if not s.activation_offload_layers or not cluster.gpu.host_link:
        return 0.0
    # Megatron-Core cpu_offloading: each offloaded layer's saved tensors, copied on a side stream
    nbytes = s.activation_offload_layers * memory.activation_bytes_per_layer(model, s, cluster.flash_attention)
    return max(0.0, nbytes / cluster.gpu.host_link - compute_seconds)


def weight_grad_seconds(ops: tuple[Op, ...]) -> float:
    """Seconds of the weight-gradient kernels among a backward's ``ops`` (``layer.is_weight_grad``)."""
    return sum(op.seconds for op in ops if kernels.is_weight_grad(op))


def output_wgrad_seconds(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """Seconds of the output layer's weight-gradient GEMM for one micro-batch (``weight_grad_seconds`` of its
    backward)."""
    return weight_grad_seconds(kernels.output_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch,
                                                      fused_loss(s), wgrad_bytes(s), s.fp8_output_layer)[1])


def defer_output_wgrad(model: ModelSpec, cluster: ClusterSpec, s: Plan, costs: Mapping[PassKey, PassCost],
                       optimizer: tuple[float, ...]) -> tuple[Mapping[PassKey, PassCost], tuple[float, ...]]:
    """The passes and per-stage optimizer seconds with ``embedding_wgrad_deferral``: the output layer's wgrad GEMM
    of the first N micro-batches leaves the last chunk's backward (spread evenly over its micro-batches) and runs on
    its rank after the schedule, before the optimizer step (Megatron-Core ``finish_embedding_wgrad_compute``)."""
    if not s.embedding_wgrad_deferral or s.pp == 1:
        return costs, optimizer
    wgrad = output_wgrad_seconds(model, cluster, s)
    deferred = min(s.embedding_wgrad_deferral, s.micro_batches)
    share = wgrad * deferred / s.micro_batches
    out = dict(costs)
    for key, cost in costs.items():
        if not key[0] and key[2]:
            parts = dict(cost.parts)
            parts["compute"] = max(0.0, parts.get("compute", 0.0) - share)
            out[key] = pass_cost(*parts.items())
    tail = tuple(x + (wgrad * deferred if holds_output(s.schedule, i, s.pp) else 0.0) for i, x in enumerate(optimizer))
    return out, tail


@lru_cache(maxsize=4096)
def weight_grad_costs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> dict[tuple[bool, bool], PassCost]:
    """The W part (weight gradients) of a backward chunk pass, keyed by (holds embedding, holds output layer):
    its layers' wgrad GEMMs, the embedding's and output layer's weight gradients and, without gradient-accumulation
    fusion, the separate accumulation. All compute; the rest of ``pass_costs``' backward is the B part."""
    lay = layer(model, cluster, s)
    n_first, n_mid, n_last = chunk_layers(model.layers, s)
    w_layer = weight_grad_seconds(lay.backward)
    emb_b = weight_grad_seconds(kernels.embedding_compute(model, cluster, s.tp, s.cp, s.sequence_parallel,
                                                          s.micro_batch, grad_bytes(s))[1])
    out_b = output_wgrad_seconds(model, cluster, s)
    # the host issues the W kernels too (costs.host_bound): a host-bound backward's W lasts its launches' issue time
    launches = sum(1 for op in lay.backward if op.name.endswith(".wgrad"))
    host = cluster.gpu.host_launch
    out = {}
    for first in (False, True):
        for last in (False, True):
            n = n_first if first else n_last if last else n_mid
            w = n * w_layer + first * emb_b + last * out_b
            if not s.gradient_accumulation_fusion:
                w += grad_accumulation(model, cluster, s, n, first, last).seconds
            out[(first, last)] = host_bound(pass_cost(("compute", w)), host * (n * launches + first + last))
    return out


def grad_accumulation(model: ModelSpec, cluster: ClusterSpec, s: Plan, layers: int, first: bool = False,
                      last: bool = False) -> Op:
    """Adding a backward pass's weight gradients (``layers`` layers, and the embedding or output layer if it
    holds them) to the accumulated ones, without gradient-accumulation fusion."""
    params = layers * model.layer_params()
    tensors = layers * kernels.layer_tensors(model)
    if first:
        # the word embedding, and the learned position table (Radford et al. 2019, GPT-2)
        params, tensors = params + model.embedding_params(), tensors + 1 + (model.position == "learned")
    if last:
        # the final norm's scale and bias, and the output matrix unless tied (Press & Wolf 2017)
        params, tensors = params + model.output_params(), tensors + 2 + (not model.tied_embeddings)
        if model.tied_embeddings and not first:
            params += model.vocab * model.hidden      # the last stage's copy of the tied embedding (Megatron-LM)
    return compute.grad_accumulation(cluster.gpu, params / s.tp, grad_bytes(s), tensors)


@under_graphs
def layer_ops(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> dict[str, tuple[Op, ...]]:
    """One layer's kernels by pass (forward, backward, recompute); the backward includes an unfused
    gradient accumulation when the plan has one."""
    lay = layer(model, cluster, s)
    backward = lay.backward
    if not s.gradient_accumulation_fusion:
        backward += (grad_accumulation(model, cluster, s, 1),)
    return {"forward": lay.forward, "backward": backward, "recompute": lay.recompute}
