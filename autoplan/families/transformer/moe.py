"""Mixture-of-experts transformers (Mixtral, DeepSeek-V3, Qwen3-MoE) under Megatron-Core's DP/TP/PP/CP plus expert
parallelism (ep) and expert tensor parallelism (etp).

Leading ``dense_layers`` are dense-FFN layers, the rest MoE layers (``autoplan/families/transformer/moe_layer.py``). Non-expert weights
are split over TP and their gradients reduced over dp·cp as for a dense model; expert weights are split over
ep·etp and their gradients reduced over the expert-data-parallel group edp = tp·cp·dp / (ep·etp) (Megatron-Core
parallel_state: the expert rank order etp-ep-edp-pp inside each pipeline stage).

Simplifications: dense layers beyond the first model chunk are priced as MoE layers in the passes (never the case
for the catalog's models, but under a V shape's uneven layout, where DeepSeek-V3's second chunk holds two); the CP ring
exchange uses the dense K/V size. DeepSeek-V3's multi-token-prediction modules (``mtp_layers``) run on the stage
holding the output layer: each one more MoE block, its projection and the shared output head (``autoplan.families.transformer.mtp``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache, partial

from autoplan.hardware import compute, network, policy

from autoplan.families.transformer import layer
from autoplan.families.transformer import fp8_scaling, moe_layer as moe, mtp, passes, step as plan, tp_overlap
from autoplan.families.transformer.knobs import fused_loss, recomputed_layers
from autoplan.families.transformer.layer import LayerCompute
from autoplan.hardware.compute import Op
from autoplan.families.costs import PAIR_COMM_SMS, CommNeed, PassCost, PassKey, StepCosts, pass_cost
from autoplan.families.base import family_of_functions
from autoplan.families.transformer.memory import (WEIGHT_BYTES, fp8_weight_bytes, end_layer_bytes, logit_bytes,
                                                  activation_bytes_per_layer, activation_input_bytes,
                                                  backward_working_bytes, dense_linear_shapes,
                                                  dummy_wgrad_bytes, linear_grad_bytes, optimizer_state_bytes,
                                                  output_shape, recomputes_whole_layers,
                                                  weight_grad_bytes_per_layer)
from autoplan.families.costs import StageMemory
from autoplan.specs.layout import inflight_layer_chunks, weight_grad_held_chunks
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.layout import (BIDIRECTIONAL, chunk_layers, ends, holds_embedding, holds_output, layout_chunks,
                                   model_copies, rank_of, stage_layers, virtual_stage)
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import FUSED_PAIRS, SPLIT_BACKWARD, Plan
from autoplan.families.transformer.validity import VIOLATION_GROUPS as DENSE_GROUPS, violations as dense_violations
from autoplan.families.transformer.graphs import under_graphs


# ----------------------------------------------------------------------------------------------- validity

def violations(model: ModelSpec, gpus: int, s: Plan) -> list[str]:
    """The dense rules plus Megatron-Core's MoE rules (megatron/core/parallel_state.py, transformer_config.py)."""
    return dense_violations(model, gpus, s) + expert_violations(model, gpus, s)


EXPERT_READS = ("ep", "etp", "tp", "cp", "dp", "pp", "sequence_parallel", "ep_overlap", "schedule", "recompute", "zero")
"""Every plan field ``expert_violations`` may read (as ``validity.PLACEMENT_READS``)."""


def expert_violations(model: ModelSpec, gpus: int, s: Plan) -> list[str]:
    """Megatron-Core's MoE rules: expert groups, sequence parallelism with TP, EP overlap, ZeRO."""
    out: list[str] = []
    if not model.moe:
        return [f"model {model.name} has no experts (family moe needs experts > 0)"]
    if model.experts % s.ep:
        out.append(f"experts {model.experts} are not divisible by ep {s.ep}")
    if (s.tp * s.cp * s.dp) % (s.ep * s.etp):
        out.append(f"ep·etp = {s.ep}·{s.etp} = {s.ep * s.etp} does not divide tp·cp·dp = "
                   f"{s.tp}·{s.cp}·{s.dp} = {s.tp * s.cp * s.dp} (Megatron-Core expert groups)")
    if model.moe_ffn_hidden % s.etp:
        out.append(f"moe_ffn_hidden {model.moe_ffn_hidden} is not divisible by etp {s.etp}")
    if model.shared_experts and (model.shared_experts * model.moe_ffn_hidden) % s.tp:
        out.append(f"shared experts' width {model.shared_experts * model.moe_ffn_hidden} is not divisible by tp {s.tp}")
    if s.tp > 1 and not s.sequence_parallel:
        # Megatron-Core MoE README: tensor and expert parallelism together require sequence parallelism; this
        # model routes sequence-sharded tokens for every tp > 1
        out.append(f"a MoE model with tp {s.tp} needs sequence parallelism")
    if s.ep_overlap and s.schedule in FUSED_PAIRS:
        # DeepSeek-V3 §3.2.1: DualPipe's overlap is its pairing of one chunk's forward with another's backward
        out.append(f"ep_overlap is what {s.schedule}'s fused forward-backward pairs already do; leave it off with "
                   f"{s.schedule}")
    elif s.ep_overlap and s.pp > 1 and s.schedule != "interleaved":
        # Megatron-Core transformer_config.py: "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must
        # be specified when pipeline_model_parallel_size > 1" (its combined 1F1B pairs the interleaved schedule's
        # forward and backward chunks); no zero-bubble runtime pairs them but DualPipe's
        out.append(f"ep_overlap with pp {s.pp} needs the interleaved schedule (Megatron-Core's combined 1F1B), not "
                   f"{s.schedule}; dualpipe and dualpipev pair their chunks themselves")
    if s.ep_overlap and s.recompute == "full":
        # Megatron-Core transformer_config.py: "Disable full recomputation when enabling
        # overlap_moe_expert_parallel_comm" (a recomputed layer has no per-module passes to pair)
        out.append("ep_overlap does not run with full recompute (Megatron-Core); use selective or modules")
    if s.zero >= 2:
        out.append(f"ZeRO stage {s.zero} is not modelled for MoE models (Megatron-Core's distributed optimizer is "
                   "ZeRO-1)")
    return out


VIOLATION_GROUPS = DENSE_GROUPS + ((EXPERT_READS, expert_violations),)
"""``violations`` as groups of rules with the fields each reads (``Family.violation_groups``)."""


# --------------------------------------------------------------------------------------------- layers

def _dense_in_first_chunk(model: ModelSpec, s: Plan) -> int:
    return min(model.dense_layers, chunk_layers(model.layers, s)[0])


def dense_per_stage(model: ModelSpec, s: Plan) -> list[int]:
    """Dense-FFN layers on each pipeline stage: the first ``dense_layers`` layers, virtual stage by virtual stage
    (virtual stage c·pp + i is chunk c of stage i, Megatron-LM interleaving; a V shape's 2p − 1 − i is chunk 1 of
    stage i)."""
    p, v = s.pp, layout_chunks(s)
    first, mid, last = chunk_layers(model.layers, s)
    sizes = [first] + [mid] * (p * v - 2) + [last] if p * v > 1 else [model.layers]
    out = [0] * p
    # DualPipe: each direction's pipeline holds every layer (a second copy of the model)
    for direction in range(2 if s.schedule == BIDIRECTIONAL else 1):
        left = model.dense_layers
        for j, n in enumerate(sizes):
            if not left:
                break
            take = min(left, n)
            out[rank_of(s.schedule, direction * p * v + j, p)] += take
            left -= take
    return out


def _layers(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> tuple[LayerCompute, moe.MoELayer]:
    key = moe.layer_key(s)
    return moe.dense_layer(model, cluster, key), moe.moe_layer(model, cluster, key)


def _coll(cluster: ClusterSpec, shape: network.GroupShape, lay: LayerCompute, which: str, s: Plan) -> float:
    return passes._collectives_time(cluster, shape, getattr(lay, which), s.collective_policy)


def _overlapped(model: ModelSpec, s: Plan) -> bool:
    """Whether the attention's TP collectives overlap its GEMMs (``--tp-comm-overlap``): Megatron-Core gives TE
    userbuffers to qkv, proj, fc1 and fc2 only, and turns the overlap off for a model whose layers name others
    (extensions/transformer_engine.py TELinear: MLA's q_proj, kv_down_proj, …)."""
    return s.tp_comm_overlap and s.sequence_parallel and s.tp > 1 and not model.kv_lora_rank


def _moe_tp(model: ModelSpec, cluster: ClusterSpec, s: Plan, shape: network.GroupShape,
            lay: LayerCompute) -> tuple[float, float, float]:
    """An MoE layer's forward, backward and recompute TP seconds: its attention's pair (and re-gather), overlapped
    under ``_overlapped`` (tp_overlap.layer_exposed), and its shared experts' pair (and re-gather), never."""
    f, b, r = (_coll(cluster, shape, lay, w, s) for w in
               ("forward_collectives", "backward_collectives", "recompute_collectives"))
    if not _overlapped(model, s):
        return f, b, r
    # moe_layer.moe_layer: forward (attention AG, RS, shared AG, RS); backward the same, then the re-gathers
    # (attention's, shared's)
    n = len(lay.forward_collectives)
    time = partial(passes._collectives_time, cluster, shape, collective_policy=s.collective_policy)
    shared_f = time(lay.forward_collectives[2:])
    shared_b = time(lay.backward_collectives[2:n] + lay.backward_collectives[n + 1:])
    attn_f, attn_b = tp_overlap.layer_exposed(model, cluster, s, tp_overlap.ATTENTION)
    return attn_f + shared_f, attn_b + shared_b, (attn_f + shared_f) if lay.recompute_collectives else 0.0


def pass_costs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> dict[PassKey, PassCost]:
    """Cost of a forward / backward chunk pass, keyed by (forward, holds embedding, holds output layer)."""
    # the passes read neither dp, the batch, ZeRO nor the DP overlaps: plans differing only there share them
    # the one thing they read of the batch: the share of passes an EP overlap leaves without a partner
    return _pass_costs(model, cluster, _pass_key(s), unpaired_share(s) if s.ep_overlap else 0.0)


def _pass_key(s: Plan) -> Plan:
    """``s`` with the fields no pass reads set to their defaults (dp, the batch, the optimizer's sharding and
    numerics, the DP overlaps), so that plans differing only there share their cached passes."""
    return replace(s, dp=1, global_batch=1, zero=0, overlap_grad_reduce=True, overlap_param_gather=True,
                   optimizer_moments="fp32", fp8_param_gather=False, zero3_per_tensor=False,
                   embedding_wgrad_deferral=0)


@lru_cache(maxsize=4096)
def _pass_costs(model: ModelSpec, cluster: ClusterSpec, s: Plan, alone: float) -> dict[PassKey, PassCost]:
    dense, mo = _layers(model, cluster, s)
    lay = mo.compute
    tp = network.shape_of(cluster, s, "tp")
    cp_fwd, cp_bwd = passes._cp_ring(model, cluster, s, lay.attention_forward)
    n_first, n_mid, n_last = chunk_layers(model.layers, s)
    d_first = _dense_in_first_chunk(model, s)
    sec = LayerCompute.seconds
    ef, eb, of, ob, emb_tp, out_tp = _end_terms(model, cluster, s, tp)
    depth = model.mtp_layers
    full = s.recompute == "full"
    # per layer: (forward, backward, recompute) compute seconds and TP collective seconds, dense and MoE
    d_f, d_b, d_r = sec(dense.forward), sec(dense.backward), sec(dense.recompute)
    m_f, m_b, m_r = sec(lay.forward), sec(lay.backward), sec(lay.recompute)
    if s.schedule in SPLIT_BACKWARD:
        # B and W issued apart, each against its own kernels (moe_layer._split_host)
        m_b += mo.split_host[0]
    d_ftp, d_btp, d_rtp = (_coll(cluster, tp, dense, w, s) for w in
                           ("forward_collectives", "backward_collectives", "recompute_collectives"))
    if _overlapped(model, s):
        # the dense layers' four linear layers overlap as a dense model's (passes._layer_terms)
        d_ftp, d_btp = tp_overlap.layer_exposed(model, cluster, s)
        d_rtp = d_ftp if dense.recompute_collectives else 0.0
    m_ftp, m_btp, m_rtp = _moe_tp(model, cluster, s, tp, lay)
    # GShard §3.2 (Lepikhin et al. 2020): dispatch and combine all-to-alls around every MoE layer's experts; the
    # backward reverses both, a full recompute repeats the forward's (``share`` of the layers under block recompute)
    m_fep = _exposed(s, mo.a2a_forward, m_f, alone) + mo.etp_forward

    def m_bep(share: float) -> float:
        # the window the backward's all-to-alls hide behind: the backward and what it recomputes (all of a partial
        # recompute's share; a selective or modules recompute always)
        window = m_b + (share if full else 1.0) * m_r
        return _exposed(s, mo.a2a_forward * (1 + share), window, alone) + mo.etp_forward * (1 + share)
    # the host issues the dense layers' and the ends' kernels too (passes._pass_costs' host floor; an MoE layer
    # prices its own host waits, moe_layer._host_waits): where it issues them slower than the GPU runs them, the GPU
    # waits the difference
    host = cluster.gpu.host_launch
    l_ef, l_eb, l_of, l_ob = _end_launches(model, cluster, s)
    l_df = len(dense.forward) + len(dense.forward_collectives)
    l_db = len(dense.backward) + len(dense.backward_collectives)
    costs = {}
    for first in (False, True):
        for last in (False, True):
            n = (n_first if first else n_last if last else n_mid) + last * depth
            d = d_first if first else 0
            k = n - d
            f_comp = d * d_f + k * m_f + first * ef + last * of
            f_tp = d * d_ftp + k * m_ftp + first * emb_tp + last * out_tp
            f_comp += max(0.0, host * (d * l_df + first * l_ef + last * l_of)
                          - (d * (d_f + d_ftp) + first * (ef + emb_tp) + last * (of + out_tp)))
            costs[(True, first, last)] = pass_cost(("compute", f_comp), ("tp", f_tp), ("cp", n * cp_fwd),
                                                   ("ep", k * m_fep))
            b_comp = d * d_b + k * m_b + first * eb + last * ob
            b_comp += max(0.0, host * (d * l_db + first * l_eb + last * l_ob)
                          - (d * (d_b + d_btp) + first * eb + last * (ob + out_tp)))
            if not s.gradient_accumulation_fusion:
                b_comp += _grad_accumulation(model, cluster, s, d, k, first, last).seconds
            # a partial (block) recompute repeats a share of the chunk's layers (knobs.recomputed_layers)
            share = (recomputed_layers(s, n) / n if n else 1.0) if full else 0.0
            # Shoeybi et al. 2019 §3: the backward has the forward's TP collectives (and a full recompute's)
            b_tp = d * (d_btp + share * d_rtp) + k * (m_btp + share * m_rtp) + last * out_tp
            costs[(False, first, last)] = pass_cost(("compute", b_comp), ("recompute", (share if full else 1.0) * (
                d * d_r + k * m_r)), ("tp", b_tp), ("cp", n * (cp_bwd + share * cp_fwd)), ("ep", k * m_bep(share)))
    return costs


def _end_launches(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> tuple[int, int, int, int]:
    """Kernels and NCCL calls the host issues for the embedding's forward and backward and the output layer's (with
    the MTP modules' heads and projections), as passes._layer_terms counts a dense model's."""
    emb_f, emb_b, emb_c = layer.embedding_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch,
                                                  plan.grad_bytes(s))
    out_f, out_b, out_c = layer.output_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch,
                                               fused_loss(s), passes.wgrad_bytes(s), s.fp8_output_layer)
    x_f, x_b, x_c = mtp.module_extras(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch)
    heads = 1 + model.mtp_layers
    extras = model.mtp_layers
    return (len(emb_f) + len(emb_c), len(emb_b), heads * (len(out_f) + len(out_c)) + extras * (len(x_f) + len(x_c)),
            heads * (len(out_b) + len(out_c)) + extras * (len(x_b) + len(x_c)))


def _end_terms(model: ModelSpec, cluster: ClusterSpec, s: Plan,
               tp: network.GroupShape) -> tuple[float, float, float, float, float, float]:
    """Seconds of the embedding's forward and backward, of the output layer's (with the MTP modules'), and of their
    TP collectives."""
    sec = LayerCompute.seconds
    emb_f, emb_b, emb_c = layer.embedding_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch,
                                                  plan.grad_bytes(s))
    out_f, out_b, out_c = layer.output_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch,
                                               fused_loss(s), passes.wgrad_bytes(s), s.fp8_output_layer)
    emb_tp = passes._collectives_time(cluster, tp, emb_c, s.collective_policy)
    out_tp = passes._collectives_time(cluster, tp, out_c, s.collective_policy)
    ef, eb, of, ob = sec(emb_f), sec(emb_b), sec(out_f), sec(out_b)
    # DeepSeek-V3 §2.2: each MTP module on the output stage is one more MoE block, its projection (mtp.py) and the
    # shared output head and loss once more
    depth = model.mtp_layers
    x_f, x_b, x_c = mtp.module_extras(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch)
    x_tp = passes._collectives_time(cluster, tp, x_c, s.collective_policy)
    of, ob, out_tp = of + depth * (of + sec(x_f)), ob + depth * (ob + sec(x_b)), out_tp + depth * (out_tp + x_tp)
    return ef, eb, of, ob, emb_tp, out_tp


def weight_grad_costs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> dict[tuple[bool, bool], PassCost]:
    """The W part of a backward chunk pass for the zero-bubble schedules, keyed by (holds embedding, holds output
    layer): the wgrad GEMMs of its dense and MoE layers (experts, shared experts, router, attention), the
    embedding's and output layer's, and an unfused accumulation (passes.weight_grad_costs for a dense model)."""
    return _weight_grad_costs(model, cluster, _pass_key(s))


@lru_cache(maxsize=1024)
def _weight_grad_costs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> dict[tuple[bool, bool], PassCost]:
    dense, mo = _layers(model, cluster, s)
    # Qi et al. 2024 §2: W = the weight-gradient GEMMs (passes.weight_grad_seconds)
    w_d, w_m = passes.weight_grad_seconds(dense.backward), passes.weight_grad_seconds(mo.compute.backward)
    w_m += mo.split_host[1]                      # W's own wait for the host (moe_layer._split_host)
    emb = passes.weight_grad_seconds(layer.embedding_compute(model, cluster, s.tp, s.cp, s.sequence_parallel,
                                                               s.micro_batch, plan.grad_bytes(s))[1])
    out = passes.output_wgrad_seconds(model, cluster, s)
    n_first, n_mid, n_last = chunk_layers(model.layers, s)
    d_first = _dense_in_first_chunk(model, s)
    depth = model.mtp_layers
    # the MTP modules' blocks, projections and shared output head (DeepSeek-V3 §2.2)
    out += depth * (out + passes.weight_grad_seconds(
        mtp.module_extras(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch)[1]))
    costs = {}
    for first in (False, True):
        for last in (False, True):
            n = (n_first if first else n_last if last else n_mid) + last * depth
            d = d_first if first else 0
            w = d * w_d + (n - d) * w_m + first * emb + last * out
            if not s.gradient_accumulation_fusion:
                w += _grad_accumulation(model, cluster, s, d, n - d, first, last).seconds
            costs[(first, last)] = pass_cost(("compute", w))
    return costs


COMM_SM_SHARE = PAIR_COMM_SMS / 132
"""Share of an H800's 132 SMs that DeepSeek-V3's overlapped all-to-all kernels occupy (arXiv 2412.19437 §3.2.2: 20
SMs suffice to saturate IB and NVLink): compute that runs beside them loses that share of its speed."""


def _exposed(s: Plan, a2a: float, compute_seconds: float, alone: float = 0.0) -> float:
    """Seconds of a layer's all-to-alls on the critical path: all of them, or with ``ep_overlap`` what the other
    micro-batch's compute cannot hide, plus the slowdown of the compute that hides them, averaged with the share
    ``alone`` of unpaired warm-up and cool-down passes that show all of theirs (``unpaired_share``). Under
    DualPipe(V) all of them: its fused forward-backward pairs hide them (costs.overlapped), outside the pairs
    nothing does."""
    if not s.ep_overlap or s.schedule in FUSED_PAIRS:
        return a2a
    # Megatron-Core --overlap-moe-expert-parallel-comm / DualPipe (arXiv 2412.19437 §3.2.1): one micro-batch's
    # all-to-alls run beside another's compute of about the same length; the passes with no partner show theirs
    hidden = min(a2a, compute_seconds)
    return alone * a2a + (1.0 - alone) * (a2a - hidden + hidden * COMM_SM_SHARE)


def unpaired_share(s: Plan) -> float:
    """Share of a stage's passes that Megatron-Core's combined 1F1B (``ep_overlap``) runs with no partner: the
    warm-up forwards and the cool-down backwards."""
    # Megatron-Core docs, "Combined 1F1B": a forward runs beside an adjacent micro-batch's backward. Without a
    # pipeline the first forward and the last backward are alone (F0, F1B0, …, B(m−1)); interleaved, rank i's
    # (p−i−1)·2 + (v−1)·p warm-up forwards (Narayanan et al. 2021 §2.2.2), (p−1) + (v−1)·p on average
    if s.pp == 1:
        return 1.0 / s.micro_batches
    return min(1.0, ((s.pp - 1) + (s.chunks - 1) * s.pp) / (s.micro_batches * s.chunks))


def _grad_accumulation(model: ModelSpec, cluster: ClusterSpec, s: Plan, dense: int, moe_layers: int,
                       first: bool = False, last: bool = False) -> Op:
    """Unfused gradient accumulation of a chunk's local layer weights (compute.grad_accumulation), and of the
    embedding or output layer where the chunk holds them (passes.grad_accumulation)."""
    ends = passes.grad_accumulation(model, cluster, s, dense, first, last) if dense or first or last else None
    params = moe_layers * sum(_moe_layer_params(model, s))
    tensors = moe_layers * layer.layer_tensors(model)
    own = compute.grad_accumulation(cluster.gpu, params, passes.grad_bytes(s), tensors)
    return replace(own, seconds=own.seconds + ends.seconds) if ends is not None else own


# ------------------------------------------------------------------------------------------- parameters

def _moe_layer_params(model: ModelSpec, s: Plan) -> tuple[float, float]:
    """(non-expert, expert) parameters of one MoE layer on one GPU."""
    routed = model.experts * model.expert_params()
    shared = model.shared_experts * model.expert_params()
    router = model.hidden * model.experts
    rest = model.moe_layer_params() - routed - shared - router
    # attention and shared experts split over TP, the router replicated (Megatron-Core TopKRouter); routed experts
    # over ep·etp (Megatron-Core MoE README, expert parallelism)
    return rest / s.tp + shared / s.tp + router, routed / (s.ep * s.etp)


def stage_params(model: ModelSpec, s: Plan, stage: int, dense: list[int] | None = None) -> tuple[float, float]:
    """(non-expert, expert) parameters one GPU of ``stage`` holds (``dense``: ``dense_per_stage``, if known)."""
    layers = stage_layers(model.layers, s, stage)
    d = (dense_per_stage(model, s) if dense is None else dense)[stage]
    other, expert = _moe_layer_params(model, s)
    # plan._stage_params: the TP share of dense layers, embedding and output (and the tied copy)
    non_expert = plan._stage_params(model, s, stage, model.layer_params()) - (layers - d) * model.layer_params() / s.tp
    mtp_blocks = model.mtp_layers if holds_output(s.schedule, stage, s.pp) else 0
    if mtp_blocks:
        # DeepSeek-V3 §2.2: each MTP module's projection and norms beside its MoE block (ModelSpec.mtp_module_params);
        # away from the first stage, a copy of the shared embedding (Megatron-Core: MTP on the last stage)
        non_expert += mtp_blocks * (model.mtp_module_params() - model.moe_layer_params()) / s.tp
        if _mtp_embedding_copy(model, s):
            non_expert += model.vocab * model.hidden / s.tp
    blocks = layers - d + mtp_blocks
    return non_expert + blocks * other, blocks * expert


def _mtp_embedding_copy(model: ModelSpec, s: Plan) -> bool:
    """The output stage keeps its own copy of the embedding for the MTP modules, all-reduced with the first stage's
    like a tied embedding (Megatron-Core): pp > 1, not a V shape (rank 0 holds both) and not already tied."""
    return (bool(model.mtp_layers) and not holds_embedding(s.schedule, s.pp - 1, s.pp)
            and not holds_output(s.schedule, 0, s.pp) and not model.tied_embeddings)


def _chunk_params(model: ModelSpec, s: Plan) -> tuple[float, float]:
    other, expert = _moe_layer_params(model, s)
    n = chunk_layers(model.layers, s)[1]
    return n * other, n * expert


def _reduce(cluster: ClusterSpec, s: Plan, params: tuple[float, float]) -> float:
    """Gradient reduction of (non-expert, expert) parameters: over dp·cp and over edp, one after the other."""
    grads = network.group_shape(cluster.domain_gpus, s.dp * s.cp, network.stride(s, "cp"))
    return plan.grad_reduce_time(cluster, grads, s, params[0]) + plan.grad_reduce_time(
        cluster, moe.edp_shape(cluster, s), s, params[1])


def _gather(cluster: ClusterSpec, s: Plan, params: tuple[float, float]) -> float:
    """All-gather of the updated shards (distributed optimizer; bf16, or FP8 with ``fp8_param_gather``, as the
    memory model keeps them) over dp·cp and over edp."""
    grads = network.group_shape(cluster.domain_gpus, s.dp * s.cp, network.stride(s, "cp"))
    width = plan.param_bytes(s)
    return (policy.all_gather(cluster, grads, width * params[0], s.collective_policy)
            + policy.all_gather(cluster, moe.edp_shape(cluster, s), width * params[1], s.collective_policy))


def _optimizer(cluster: ClusterSpec, s: Plan, params: tuple[float, float]) -> float:
    # Rajbhandari et al. 2020 (ZeRO) §5.1: the distributed optimizer updates 1/(dp·cp) of the non-expert and
    # 1/edp of the expert parameters (Megatron-Core shards expert optimizer state over the expert-DP group)
    local, copies = sum(params), model_copies(s.schedule)
    sharded = (params[0] / (s.dp * s.cp) + params[1] / s.edp) / copies if s.zero >= 1 else local
    # the step's fixed host time ends it, as a dense model's (step._optimizer, GPUSpec.host_step)
    return plan.shard_update_seconds(cluster, s, local, sharded) + cluster.gpu.host_step


# ---------------------------------------------------------------------------------------------- the step

@under_graphs
def step_costs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> StepCosts:
    """Seconds of every task kind of one step of plan ``s`` (which must be valid)."""
    p, group = s.pp, s.dp * s.cp
    replicated = group > 1 or s.edp > 1
    chunk = _chunk_params(model, s)
    segments = 0
    if replicated and s.overlap_grad_reduce:
        segments = plan._segments(sum(chunk), s)
    params = [stage_params(model, s, i) for i in range(p)]
    reduce_all = final_gather = None
    if not segments and replicated:
        # one reduction per DDP bucket after the backward (Li et al. 2020, PyTorch Distributed §3.2.3)
        counts = [max(1, math.ceil(sum(x) / plan.bucket_params(s))) for x in params]
        reduce_all = tuple(_reduce(cluster, s, (x[0] / n, x[1] / n)) * n for x, n in zip(params, counts))
    if s.zero >= 1 and replicated and not s.overlap_param_gather:
        final_gather = tuple(_gather(cluster, s, x) for x in params)
    tied = None
    if (model.tied_embeddings and p > 1 and not holds_output(s.schedule, 0, p)) or _mtp_embedding_copy(model, s):
        # Megatron-LM finalize_model_grads: the first and last stage all-reduce the tied embedding's gradient (the
        # MTP modules' shared embedding alike; a V shape's rank 0 holds both ends)
        pair = network.group_shape(cluster.domain_gpus, 2, network.stride(s, "pp") * (p - 1))
        tied = network.all_reduce(cluster, pair, passes.grad_bytes(s) * model.vocab * model.hidden / s.tp)
    piece = (chunk[0] / segments, chunk[1] / segments) if segments else chunk
    deferred, optimizer = passes.defer_output_wgrad(model, cluster, s, pass_costs(model, cluster, s),
                                                    tuple(_optimizer(cluster, s, x) for x in params))
    priced = fp8_scaling.with_reductions(deferred, fp8_scaling.reduction_seconds(cluster, s))
    gather = _gather(cluster, s, chunk) if s.zero >= 1 and s.overlap_param_gather and replicated else None
    return StepCosts(
        passes=priced,
        optimizer=optimizer,
        hop=plan.pp_hop_time(model, cluster, s, network.shape_of(cluster, s, "pp").nodes == 1) if p > 1 else 0.0,
        segments=segments,
        segment_reduce=_reduce(cluster, s, piece) if segments else None,
        param_gather=gather, param_gather_lead=plan.gather_lead(gather, priced, sum(chunk), s),
        shard_gather=0.0, shard_reduce=0.0, reduce_all=reduce_all, final_gather=final_gather, tied=tied,
        weight_grad=weight_grad_costs(model, cluster, s) if s.schedule in SPLIT_BACKWARD else None)


def _stages_to_check(model: ModelSpec, s: Plan, dense: list[int] | None = None) -> tuple[int, ...]:
    """The first and last stages, stage 1 (the most in-flight of the middle) and every stage holding dense layers:
    any other middle stage holds the same MoE layers as stage 1 with fewer in flight."""
    dense = dense_per_stage(model, s) if dense is None else dense
    return tuple(sorted({0, s.pp - 1, min(1, s.pp - 1)} | {i for i, d in enumerate(dense) if d}))


@under_graphs
def lower_bound(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """Seconds the busiest checked stage's compute stream needs (its passes and optimizer)."""
    # a stream's busy time bounds the critical path from below (Graham 1969, list-scheduling bounds)
    costs = pass_costs(model, cluster, s)
    p, v, m = s.pp, s.chunks, s.micro_batches
    worst = 0.0
    # DualPipe(V)'s fused pairs may hide all of a pass's communication (DeepSeek-V3 §3.2.1): only compute is certain
    seconds = plan._compute_seconds if s.schedule in FUSED_PAIRS else (lambda c: c.seconds)
    dense = dense_per_stage(model, s)
    for i in _stages_to_check(model, s, dense):
        # each chunk runs every micro-batch (DualPipe: each direction's half, model_copies)
        busy = m / model_copies(s.schedule) * sum(
            seconds(costs[(fwd, *ends(s.schedule, virtual_stage(s.schedule, i, c, p), p, v))])
            for c in range(v) for fwd in (True, False))
        worst = max(worst, busy + _optimizer(cluster, s, stage_params(model, s, i, dense)))
    return worst


@under_graphs
def quick_bound(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """``lower_bound`` of the first stage from its layers alone: their compute, and a MoE layer's all-to-alls where
    nothing hides them; no embedding, output layer, TP or CP communication, recompute or optimizer. Plans of one
    layer shape share those seconds, so the search can order every plan by it and ask ``lower_bound`` only of the
    plans it reaches."""
    p, v = s.pp, s.chunks
    n_first, n_mid, n_last = chunk_layers(model.layers, s)
    # the all-to-alls a pass shows whole (_exposed: no EP overlap; DualPipe's pairs may hide them: lower_bound)
    shown = not s.ep_overlap and s.schedule not in FUSED_PAIRS
    dense, experts = _layer_seconds(model, cluster, type(s), tuple(getattr(s, f) for f in moe.LAYER_FIELDS), shown)
    busy = 0.0
    for c in range(v):
        first, last = ends(s.schedule, virtual_stage(s.schedule, 0, c, p), p, v)
        n = n_first if first else n_last if last else n_mid
        d = _dense_in_first_chunk(model, s) if first else 0        # as _pass_costs splits a chunk
        busy += d * dense + (n - d) * experts
    # each chunk runs every micro-batch, forward and backward (DualPipe: each direction's half, model_copies)
    return s.micro_batches / model_copies(s.schedule) * busy


@lru_cache(maxsize=1024)
def _layer_seconds(model: ModelSpec, cluster: ClusterSpec, plan_class: type, key: tuple,
                   shown: bool) -> tuple[float, float]:
    """Seconds a dense and a MoE layer add at least to a forward and a backward pass, for the plans whose
    ``moe.LAYER_FIELDS`` hold ``key``: their compute, and with ``shown`` a MoE layer's dispatch and combine (the
    forward's once, the backward's at least once: _pass_costs)."""
    dense, mo = _layers(model, cluster, plan_class(**dict(zip(moe.LAYER_FIELDS, key))))
    sec = LayerCompute.seconds
    a2a = 2 * (mo.a2a_forward + mo.etp_forward) if shown else 0.0
    return (sec(dense.forward) + sec(dense.backward),
            sec(mo.compute.forward) + sec(mo.compute.backward) + a2a)


# ------------------------------------------------------------------------------------------------ memory

def moe_activation_bytes(model: ModelSpec, s: Plan, flash: bool, recompute: str | None = None) -> tuple[float, float]:
    """Bytes of activations one (dense, MoE) layer stores for one micro-batch on one GPU (under ``recompute``
    instead of the plan's, if given)."""
    recompute = s.recompute if recompute is None else recompute
    modules = recompute == "modules"
    # recompute modules keeps what recompute none keeps, less the recomputed modules' outputs (below)
    dense = activation_bytes_per_layer(model, s, flash, "none" if modules else recompute)
    if recompute == "full":
        return dense, dense                  # Korthikanti Table 2: only the layer input
    sb = model.seq_len / s.cp * s.micro_batch
    # a linear layer's saved input is its FP8 cast under an FP8 precision (Transformer Engine; DeepSeek-V3
    # §3.3.3 caches the activations of the Linear backward in FP8), else BF16
    linear_in = 1 if moe.fp8(s) else 2
    sp = s.tp if s.sequence_parallel else 1
    if modules:
        # Megatron-Core --recompute-modules layernorm: the two norm outputs (the QKV / down-projection input and
        # the MLP / router input, Korthikanti §4.1-4.2 2sbh each) are recomputed from the norm inputs
        dense -= 2 * linear_in * sb * model.hidden / sp
    if model.mla:
        # DeepSeek-V2 §2.1: Q, K of d + d_R, V and the projection input of d_v per head, and the q/kv latents
        a = model.heads
        dense += 2 * sb * a * (2 * model.qk_head_dim + 2 * model.value_dim - 2 * model.head_dim
                               - 2 * model.kv_dim // a) / s.tp
        dense += sb * (linear_in * (model.q_lora_rank + model.kv_lora_rank) + 2 * model.qk_rope_head_dim)
        if modules:
            # DeepSeek-V3 §3.3.3: the up-projections run again in the backward, so Q, K and V are not kept
            dense -= 2 * sb * a * (2 * model.qk_head_dim + model.value_dim) / s.tp
    act_in = activation_input_bytes(model, s)        # SwiGLU's gate and up, BF16 or FP8-stored
    mlp = (act_in + 2) * sb * model.ffn_hidden / s.tp                        # Korthikanti §4.2 (dense MLP)
    if moe.fp8(s):
        mlp -= sb * model.ffn_hidden / s.tp  # the fc2 input's FP8 cast (memory.activation_bytes_per_layer)
    rows = model.experts // s.ep * moe.expert_rows(model, s)
    width = model.moe_ffn_hidden / s.etp
    # the routed copies: fc1 input h, activation input (act_in bytes) and fc2 input per expert width;
    # fp32 router probabilities (Fedus et al. 2021 §2.1); recompute modules runs the SwiGLU again (DeepSeek-V3
    # §3.3.3: its input is cached, its output recomputed), so the fc2 input is not kept
    fc2_in = 0 if modules else linear_in
    routed = linear_in * rows * model.hidden + (act_in + fc2_in) * rows * width
    routed += 4 * moe.local_tokens(model, s) * model.experts
    shared = (act_in + fc2_in) * sb * model.shared_experts * model.moe_ffn_hidden / s.tp
    return dense, dense - mlp + routed + shared


def _working_bytes(model: ModelSpec, s: Plan, flash: bool, stored: tuple[float, float]) -> tuple[float, float]:
    """``memory.recompute_working_bytes`` of a dense and of an MoE layer (``stored``: their
    ``moe_activation_bytes``)."""
    if not recomputes_whole_layers(s):
        return 0.0, 0.0
    kept = moe_activation_bytes(model, s, flash, "none")
    return kept[0] - stored[0], kept[1] - stored[1]


def moe_backward_working_bytes(model: ModelSpec, s: Plan) -> float:
    """``memory.backward_working_bytes`` of an MoE layer: the largest of its attention's linear layers' (MLA's
    projections for MLA), the grouped expert fc1's (the gradients of every local expert's routed rows, output and
    input) and the shared experts' fc1's."""
    sb, h, gate = model.seq_len / s.cp * s.micro_batch, model.hidden, 2 if model.gated else 1
    rows = model.experts // s.ep * moe.expert_rows(model, s)
    return max(*(linear_grad_bytes(sb, r, c) for r, c in _attention_shapes(model, s.tp)),
               linear_grad_bytes(rows, gate * model.moe_ffn_hidden / s.etp, h),
               linear_grad_bytes(sb, gate * model.shared_experts * model.moe_ffn_hidden / s.tp, h))


def moe_weight_grad_bytes(model: ModelSpec, s: Plan) -> float:
    """Bytes one MoE layer keeps from its B to its W for one micro-batch: each linear layer's input and the
    gradient of its output (``memory.weight_grad_bytes_per_layer``'s terms for the attention), over the routed
    copies for the experts and the whole sequence for the shared experts."""
    sb = model.seq_len / s.cp * s.micro_batch
    sp = s.tp if s.sequence_parallel else 1
    gate = 2 if model.gated else 1
    # Qi et al. 2024 Table 1: QKV's input and the projection's output gradient 2sbh each (÷tp with SP), the
    # projection's input and QKV's output gradient sharded
    attention = 2 * sb * model.hidden * 2 / sp + 2 * sb * (2 * model.q_dim + 2 * model.kv_dim) / s.tp
    rows = model.experts // s.ep * moe.expert_rows(model, s)
    width = model.moe_ffn_hidden / s.etp
    # fc1's input and fc2's output gradient h, fc1's output gradient and fc2's input its width, per routed copy
    routed = 2 * rows * (2 * model.hidden + (gate + 1) * width)
    shared_ffn = model.shared_experts * model.moe_ffn_hidden
    shared = (2 * sb * (gate + 1) * shared_ffn / s.tp + 2 * sb * model.hidden / sp) if shared_ffn else 0.0
    return attention + routed + shared


@lru_cache(maxsize=1024)
def _attention_shapes(model: ModelSpec, t: int) -> tuple[tuple[int, int], ...]:
    """(rows, columns) on one GPU of the attention's linear weights at TP ``t``: QKV and the projection, or MLA's."""
    if not model.mla:
        return dense_linear_shapes(model, t)[:2]
    h, a = model.hidden, model.heads
    # Megatron-Core multi_latent_attention.py: the down-projections duplicated over TP (parallel_mode "duplicated"),
    # the up-projections column-parallel, the output projection row-parallel
    q = ((model.q_lora_rank, h), (a * model.qk_head_dim // t, model.q_lora_rank)) if model.q_lora_rank else (
        (a * model.qk_head_dim // t, h),)
    return (*q, (model.kv_lora_rank + model.qk_rope_head_dim, h),
            (a * (model.head_dim + model.value_dim) // t, model.kv_lora_rank), (h, a * model.value_dim // t))


def linear_shapes(model: ModelSpec, s: Plan, dense_layers: int, moe_layers: int) -> tuple[tuple[int, int], ...]:
    """(rows, columns) on one GPU of the linear weights of ``dense_layers`` dense and ``moe_layers`` MoE layers:
    the attention's, the dense MLP's, the routed and shared experts' (``memory.dummy_wgrad_bytes``)."""
    if not (dense_layers or moe_layers):
        return ()
    t, h = s.tp, model.hidden
    shapes = _attention_shapes(model, t)
    if dense_layers:
        shapes += dense_linear_shapes(model, t)[2:]
    if moe_layers:
        # Megatron-Core TEGroupedMLP: each local expert's fc1 and fc2 over etp; the shared experts over TP
        gate = 2 if model.gated else 1
        width, shared = model.moe_ffn_hidden // s.etp, model.shared_experts * model.moe_ffn_hidden // t
        shapes += ((gate * width, h), (h, width)) + (((gate * shared, h), (h, shared)) if shared else ())
    return shapes


def _stage_memory(model: ModelSpec, cluster: ClusterSpec, s: Plan, stage: int, per_layer: tuple[float, float],
                  working: tuple[float, float], dense: list[int]) -> StageMemory:
    """``working``: ``_working_bytes``, the larger of the layer kinds the stage holds added; ``dense``:
    ``dense_per_stage``."""
    non_expert, expert = stage_params(model, s, stage, dense)
    copies = model_copies(s.schedule)      # DualPipe: both copies of a stage share its optimizer state
    n, e = s.dp * s.cp * copies, s.edp * copies
    optimizer = optimizer_state_bytes(s) * (non_expert / n + expert / e if s.zero >= 1 else non_expert + expert)
    # Megatron-Core optimizer CPU offload: that share of the optimizer state lives in host memory
    optimizer *= 1 - s.optimizer_offload_pct / 100
    layers = stage_layers(model.layers, s, stage)
    d = dense[stage]
    blocks = model.mtp_layers if holds_output(s.schedule, stage, s.pp) else 0
    weights = WEIGHT_BYTES * (non_expert + expert)
    if moe.fp8(s):
        # memory._stage: Transformer Engine caches an FP8 copy (and transpose) of each layer weight, replacing the
        # BF16 one under fp8_param_gather; the embedding and output layer stay BF16
        other, routed = _moe_layer_params(model, s)
        fp8_layer = d * model.layer_params() / s.tp + (layers - d + blocks) * (other + routed)
        fp8_bytes = fp8_weight_bytes(cluster.gpu, s)
        weights += fp8_bytes * fp8_layer - (WEIGHT_BYTES * fp8_layer if s.fp8_param_gather else 0)
    if s.recompute_layers and layers:
        # block recompute (knobs.recomputed_layers): a share of each chunk's layers keeps only its input
        share = recomputed_layers(s, layers / s.chunks) / (layers / s.chunks)
        kept = moe_activation_bytes(model, s, cluster.flash_attention, "none")
        per_layer = tuple(share * a + (1 - share) * b for a, b in zip(per_layer, kept))
    # Narayanan et al. SC'21 §2.2: each in-flight chunk-forward holds its layers' activations (mean per chunk)
    chunks = inflight_layer_chunks(s, stage)
    acts = chunks * (d * per_layer[0] + (layers - d) * per_layer[1]) / s.chunks
    acts += max(working[0] if d else 0.0, working[1] if layers > d else 0.0)
    waiting_w = weight_grad_held_chunks(s, stage)
    if waiting_w:
        # ZB-H1: the chunks whose W waits keep what their weight-gradient GEMMs read (memory._activation_bytes)
        acts += waiting_w * (d * weight_grad_bytes_per_layer(model, s) + (layers - d) * moe_weight_grad_bytes(
            model, s)) / s.chunks
    embedding = end_layer_bytes(model, s, stage, chunks)       # the embedding and output layer (memory.py)
    if blocks:
        # the MTP modules of the one micro-batch in flight on the output layer (as memory._stage's output layer):
        # each its MoE block, its projection's inputs and the shared head's input and fp32 logits once more
        sp = s.tp if s.sequence_parallel else 1
        tokens = model.seq_len / s.cp * s.micro_batch
        head = 2 * tokens * model.hidden / sp + logit_bytes(s) * tokens * model.vocab / s.tp
        acts += blocks * per_layer[1]
        embedding += blocks * (head + mtp.extras_activation_bytes(model, s.micro_batch, s.tp, s.cp,
                                                                  s.sequence_parallel))
    shapes = linear_shapes(model, s, d, layers - d + blocks) + (
        (output_shape(model, s.tp),) if holds_output(s.schedule, stage, s.pp) else ())
    # Transformer Engine's placeholder weight gradients, and the gradients the backward running at the peak holds
    grads_held = max(backward_working_bytes(model, s) if d else 0.0,
                     moe_backward_working_bytes(model, s) if layers > d else 0.0)
    return StageMemory(stage=stage, weights=weights,
                       gradients=passes.grad_bytes(s) * (non_expert + expert), optimizer=optimizer, activations=acts,
                       embedding=embedding, buffers=dummy_wgrad_bytes(s, shapes) + grads_held,
                       reserve=cluster.gpu.memory_reserve_bytes)


def memory(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[StageMemory]:
    """Bytes per GPU of every pipeline stage, first to last."""
    per_layer = moe_activation_bytes(model, s, cluster.flash_attention)
    working = _working_bytes(model, s, cluster.flash_attention, per_layer)
    dense = dense_per_stage(model, s)
    return [_stage_memory(model, cluster, s, i, per_layer, working, dense) for i in range(s.pp)]


def peak_memory(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """The most bytes any GPU needs: stages 0, 1 and the last (a later middle stage holds no more)."""
    per_layer = moe_activation_bytes(model, s, cluster.flash_attention)
    working = _working_bytes(model, s, cluster.flash_attention, per_layer)
    dense = dense_per_stage(model, s)
    return max(_stage_memory(model, cluster, s, i, per_layer, working, dense).total
               for i in _stages_to_check(model, s, dense))


# --------------------------------------------------------------------------------------- what check lists

def collectives(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[CommNeed]:
    """The dense plan's collectives, plus the EP all-to-alls, the expert-TP pair and the expert-DP reduction."""
    out = [c for c in plan.collectives(model, cluster, s) if c.group != "dp"]
    # an MoE layer's TP pair is its attention's, and its shared experts' if it has them (moe_layer.moe_layer)
    pairs = len(_layers(model, cluster, s)[1].compute.forward_collectives) // 2
    out = [replace(c, when=f"{pairs}× per MoE layer and pass") if c.group == "tp" else c for c in out]
    if s.ep > 1:
        shape = moe.ep_shape(cluster, s)
        limited = (f", node-limited to {model.route_nodes} nodes" if model.route_nodes
                   else ", once per target node (flex)" if s.moe_dispatcher == "flex" else "")
        # the dispatch (FP8 under DeepSeek-V3's own kernels) and the BF16 combine, each once per MoE layer and pass
        for what, nbytes, value in (("dispatch", moe.dispatch_bytes(model, s), moe.dispatch_value_bytes(s)),
                                    ("combine", moe.combine_bytes(model, s), compute.BF16)):
            out.append(CommNeed(group="ep", op="all_to_all", shape=shape, nbytes=nbytes,
                                seconds=moe.routed_a2a_time(model, cluster, s, value),
                                when=f"{what}, per MoE layer and pass ({model.moe_layers} MoE layers{limited})"))
    if s.etp > 1:
        # BF16 tokens whatever the dispatch (moe_layer._expert_tp_seconds)
        shape, nbytes = moe.etp_shape(cluster, s), moe.routed_bytes(model, s, compute.BF16) * s.etp
        out.append(CommNeed(group="etp", op="all_gather", shape=shape, nbytes=nbytes,
                            seconds=policy.all_gather(cluster, shape, nbytes, s.collective_policy),
                            when="dispatched tokens, per MoE layer and pass (and a reduce-scatter back)"))
    grads = network.group_shape(cluster.domain_gpus, s.dp * s.cp, network.stride(s, "cp"))
    op = "reduce_scatter" if s.zero >= 1 else "all_reduce"
    per_stage = [stage_params(model, s, i) for i in _stages_to_check(model, s)]
    non_expert, expert = max(p[0] for p in per_stage), max(p[1] for p in per_stage)
    for shape, params, who in ((grads, non_expert, "non-expert"), (moe.edp_shape(cluster, s), expert, "expert")):
        if shape.size > 1 and params > 0:
            nbytes = passes.grad_bytes(s) * min(params, plan.bucket_params(s))
            group = 'edp' if who == 'expert' else 'dp·cp'
            out.append(CommNeed(group="dp", op=op, shape=shape, nbytes=nbytes,
                                seconds=policy.COLLECTIVES[op](cluster, shape, nbytes, s.collective_policy),
                                when=f"{who} gradients per bucket ({group} group)"))
            if s.zero >= 1:
                # the distributed optimizer's weight all-gather (_gather)
                gathered = plan.param_bytes(s) * min(params, plan.bucket_params(s))
                out.append(CommNeed(group="dp", op="all_gather", shape=shape, nbytes=gathered,
                                    seconds=policy.all_gather(cluster, shape, gathered, s.collective_policy),
                                    when=f"{who} weights per bucket ({group} group)"))
    return out


@under_graphs
def block_ops(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> dict[str, tuple[Op, ...]]:
    """One MoE layer's kernels by pass (forward, backward, recompute)."""
    lay = _layers(model, cluster, s)[1].compute
    return {"forward": lay.forward, "backward": lay.backward, "recompute": lay.recompute}


MOE = family_of_functions(globals(), "moe", ("dp", "tp", "pp", "cp", "ep", "etp"), default_space="moe")
"""A mixture-of-experts decoder (dense leading layers, MoE layers, MLA or GQA attention); its default space adds
expert parallelism (search_spaces/moe.toml)."""
