"""Step-level costs of a dense transformer plan beyond its passes: parameters per stage, pipeline transfers,
the DP gradient reduction and parameter gathers (Megatron-LM DDP buckets, ZeRO), the tied embedding's
all-reduce and the optimizer step; the search's optimistic bound; what ``autoplan check`` lists."""

from __future__ import annotations

import math
from functools import lru_cache

from autoplan.hardware import compute, network, policy
from autoplan.families.transformer import fp8_scaling, zero3_tensors
from autoplan.families.transformer.memory import MASTER_WEIGHT_BYTES, MOMENT_BYTES
from autoplan.families.costs import (COMPUTE_KINDS, CommNeed, PassCost, PassKey, StepCosts,
                                     pipelined_gather_lead, with_part)
from autoplan.families.transformer.graphs import under_graphs
from autoplan.families.transformer.passes import (cp_kv_bytes, defer_output_wgrad, grad_bytes, layer,
                                                  layer_pass_seconds, pass_costs, pass_key, ulysses_bytes,
                                                  weight_grad_costs)
from autoplan.specs.cluster import ClusterSpec
from autoplan.hardware.support import cp_a2a_degree
from autoplan.specs.model import ModelSpec
from autoplan.specs.layout import (chunk_layers, ends, holds_embedding, holds_output, model_copies, stage_layers,
                                   virtual_stage)
from autoplan.specs.plan import FUSED_PAIRS, SPLIT_BACKWARD, Plan

PARAM_BYTES = 2         # bf16 weights, all-gathered after a sharded optimizer step (Megatron-LM distributed optimizer)
BUCKET_PARAMS = 40e6    # Megatron-LM DDP bucket size: max(40M, 1M·dp) parameters (distributed_data_parallel.py)
MAX_BUCKETS = 8         # this model's simplification: finer buckets change the overlap by less than one's reduce


def param_bytes(s: Plan) -> int:
    """Bytes per weight in the distributed optimizer's all-gathers: bf16, or FP8 with ``fp8_param_gather``."""
    # Megatron-LM --fp8-param-gather: the sharded optimizer all-gathers FP8 weights, half the bf16 bytes
    return 1 if s.fp8_param_gather else PARAM_BYTES


def stage_params(model: ModelSpec, s: Plan, stage: int) -> float:
    """Parameters one GPU of ``stage`` holds (its share of the TP-sharded layers, embedding and output)."""
    return _stage_params(model, s, stage, model.layer_params())


def _stage_params(model: ModelSpec, s: Plan, stage: int, layer_params: int) -> float:
    params = stage_layers(model.layers, s, stage) * layer_params / s.tp
    embedding = holds_embedding(s.schedule, stage, s.pp)
    if embedding:
        params += model.embedding_params() / s.tp
    if holds_output(s.schedule, stage, s.pp):
        params += model.output_params() / s.tp
        if model.tied_embeddings and not embedding:
            # Megatron-LM: with pp > 1 the last stage holds a copy of the tied embedding (a V shape's first rank
            # holds both ends: no copy)
            params += model.vocab * model.hidden / s.tp
    return params


def chunk_params(model: ModelSpec, s: Plan) -> float:
    """Parameters of one model chunk's layers on one GPU (its TP share)."""
    return chunk_layers(model.layers, s)[1] * model.layer_params() / s.tp


def bucket_params(s: Plan) -> float:
    """Parameters per DDP gradient bucket (Megatron-LM: max(40M, 1M·dp) over the dp·cp group)."""
    return max(BUCKET_PARAMS, 1e6 * s.dp * s.cp)


def grad_segments(model: ModelSpec, s: Plan) -> int:
    """Pieces of a chunk's last backward: one per DDP bucket of its gradients, at most MAX_BUCKETS."""
    return _segments(chunk_params(model, s), s)


def _segments(chunk: float, s: Plan) -> int:
    # a bucket's reduction starts as soon as its gradients are ready (Li et al. 2020 §3.2.3, overlap)
    return min(MAX_BUCKETS, max(1, math.ceil(chunk / bucket_params(s))))


def gather_lead(gather: float | None, passes: dict[PassKey, PassCost], params: float, s: Plan) -> float | None:
    """Of a chunk's weight all-gather, the seconds its first forward waits for (``pipelined_gather_lead``): without
    a pipeline, the model's ``params`` in DDP buckets beside its first forward; else the whole gather."""
    # Megatron-Core DDP (distributed_data_parallel.py): buckets only on the first pipeline stage's first chunk, and
    # only with overlap_grad_reduce; one bucket, the whole buffer, elsewhere. A pipeline's first stage is priced as
    # the others (one slot for every chunk's gather): its later buckets' overlap is left out
    if gather is None or s.pp > 1 or not s.overlap_grad_reduce:
        return gather
    first = passes[(True, *ends(s.schedule, virtual_stage(s.schedule, 0, 0, s.pp), s.pp, s.chunks))]
    return pipelined_gather_lead(gather, first.seconds, max(1, math.ceil(params / bucket_params(s))))


def pp_activation_bytes(model: ModelSpec, s: Plan) -> int:
    """Bytes of one micro-batch's activations between stages (the full tensor, before any TP split)."""
    # Narayanan et al. SC'21 §4.1: a b·s·h bf16 tensor (s/cp tokens per CP rank)
    return compute.BF16 * s.micro_batch * (model.seq_len // s.cp) * model.hidden


def pp_hop_time(model: ModelSpec, cluster: ClusterSpec, s: Plan, same_node: bool) -> float:
    """Seconds to pass one micro-batch's activations (or their gradients) to the next stage."""
    full = pp_activation_bytes(model, s)
    # each TP rank sends its 1/tp share; without SP the receiver all-gathers it over NVLink to the replicated
    # tensor (Narayanan et al. SC'21 §4.1, scatter/gather); with SP the tensor is already sequence-sharded
    seconds = network.send_recv(cluster, same_node, full / s.tp)
    if s.tp > 1 and not s.sequence_parallel:
        seconds += policy.all_gather(cluster, network.shape_of(cluster, s, "tp"), full, s.collective_policy)
    return seconds


def grad_reduce_time(cluster: ClusterSpec, shape: network.GroupShape, s: Plan, params: float) -> float:
    """Seconds to reduce ``params`` gradients over the DP·CP group: reduce-scatter under ZeRO, else all-reduce."""
    nbytes = grad_bytes(s) * params
    if s.zero >= 1:
        # Rajbhandari et al. 2020 (ZeRO) §5.1: each rank keeps only its shard's reduced gradients
        return policy.reduce_scatter(cluster, shape, nbytes, s.collective_policy)
    return policy.all_reduce(cluster, shape, nbytes, s.collective_policy)


def optimizer_seconds(model: ModelSpec, cluster: ClusterSpec, s: Plan, stage: int) -> float:
    """Seconds of ``stage``'s optimizer step (its parameters' share under ZeRO ≥ 1)."""
    return _optimizer(cluster, s, stage_params(model, s, stage))


def megatron_optimizer_bytes(s: Plan, local: float, updated: float) -> float:
    """HBM bytes of a Megatron-Core step's passes over the gradient buffer of the ``local`` parameters a GPU holds
    and of its optimizer's step over the ``updated`` ones (its distributed-optimizer shard, or all of them).

    Read in Megatron-LM 23e00ed (the Megatron-LM of the SimuMax B200 runs): training.py train_step zeroes the whole
    gradient buffer (``zero_grad_buffer``); param_and_grad_buffer.py ``start_grad_sync`` takes each bucket's norm
    (``check_grads``, on by default: --check-for-nan-in-loss-and-grad) and scales it by 1/(dp·cp) before the
    reduction when the group has several ranks; the optimizer copies 16-bit grads to fp32 main grads
    (distrib_optimizer.py ``_copy_model_grads_to_main_grads``, ``.float()``: none when the buffer is fp32), takes
    the grad norm (clip_grads.py), runs fused Adam and copies the fp32 master weights to the model's weights
    (``_copy_main_params_to_model_params``). The clipping multiply runs only when the norm exceeds --clip-grad: not
    counted."""
    g = grad_bytes(s)
    # zero (write g), norm (read g), scale by 1/(dp·cp) (read and write g) per held parameter
    buffer = g + g + (2 * g if s.dp * s.cp > 1 else 0)
    main_grad = 0 if g == MASTER_WEIGHT_BYTES else g + MASTER_WEIGHT_BYTES
    moments = 2 * MOMENT_BYTES[s.optimizer_moments]
    # Kingma & Ba 2015 Alg. 1 (Adam) fused: read master weight, fp32 grad and both moments, write weight and moments
    adam = 2 * MASTER_WEIGHT_BYTES + MASTER_WEIGHT_BYTES + 2 * moments
    # grad norm (read the fp32 grad), Adam, the master-to-model copy (read fp32, write the model's weight type)
    step = main_grad + MASTER_WEIGHT_BYTES + adam + MASTER_WEIGHT_BYTES + param_bytes(s)
    return buffer * local + step * updated


MEGATRON_OPTIMIZER_KERNELS = 6
"""Kernels of those passes (zero, norm, scale, grad norm, Adam, copy), each at least once."""


def host_optimizer_time(cluster: ClusterSpec, s: Plan, host: float) -> float:
    """Seconds the step waits for the host's share (``host`` parameters) of an offloaded optimizer step."""
    if not host:
        return 0.0
    # Megatron-Core optimizer CPU offload: the host's CPU Adam updates its share while the gradients go down and
    # the bf16 weights come back (--overlap-cpu-optimizer-d2h-h2d): the longer of the two
    gpu = cluster.gpu
    return max(host / gpu.host_adam_params_per_s, host * (grad_bytes(s) + PARAM_BYTES) / gpu.host_link)


def shard_update_seconds(cluster: ClusterSpec, s: Plan, local: float, sharded: float) -> float:
    """Seconds of the optimizer step over the ``sharded`` parameters a GPU updates of the ``local`` ones it holds,
    the offloaded share (``optimizer_offload_pct``) on the host."""
    # Megatron-Core optimizer CPU offload: that share of the shard is updated by the host (host_optimizer_time)
    host = sharded * s.optimizer_offload_pct / 100
    if s.zero == 3:
        # FSDP / DeepSpeed stage 3: no Megatron gradient buffer (compute.optimizer_time: Adam over the shard)
        seconds = compute.optimizer_time(cluster.gpu, local, sharded - host)
    else:
        # Megatron-Core's passes over the gradient buffer and its optimizer step (megatron_optimizer_bytes)
        seconds = compute.memory_time(cluster.gpu, megatron_optimizer_bytes(s, local, sharded - host),
                                      kernels=MEGATRON_OPTIMIZER_KERNELS)
    return seconds + host_optimizer_time(cluster, s, host)


def _optimizer(cluster: ClusterSpec, s: Plan, params: float) -> float:
    # Rajbhandari et al. 2020 (ZeRO) §5.1: stage ≥ 1 updates 1/(dp·cp) of the parameters (DualPipe: of both copies)
    shards = s.dp * s.cp * model_copies(s.schedule)
    sharded = params / shards if s.zero >= 1 else params
    seconds = shard_update_seconds(cluster, s, params, sharded)
    # the step's fixed host time (GPUSpec.host_step) ends it on every stage, the GPU idle: Megatron-LM's training
    # step reads the grad norm and the loss back to the host, and its logging runs, before the next step's launches
    return seconds + cluster.gpu.host_step


def zero3_layer_gather(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """Seconds of the all-gather of one layer's bf16 weights (its TP share) over the DP·CP group (ZeRO-3)."""
    # FSDP/ZeRO-3 gather one unit (a transformer layer) before its forward and again before its backward
    # (Rajbhandari et al. 2020 §7.2.2; Zhao et al. 2023, PyTorch FSDP, VLDB 16(12) §3.2)
    return policy.all_gather(cluster, _dp_shape(cluster, s), PARAM_BYTES * model.layer_params() / s.tp,
                             s.collective_policy)


def zero3_layer_reduce(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """Seconds of the reduce-scatter of one layer's gradients over the DP·CP group (ZeRO-3)."""
    return grad_reduce_time(cluster, _dp_shape(cluster, s), s, model.layer_params() / s.tp)


def _dp_shape(cluster: ClusterSpec, s: Plan) -> network.GroupShape:
    return network.group_shape(cluster.domain_gpus, s.dp * s.cp, network.stride(s, "cp"))


def zero3_exposed(layers: int, forward: float, backward: float, gather: float, reduce: float) -> tuple[float, float]:
    """Seconds of ZeRO-3 communication a forward and a backward pass of ``layers`` layers cannot hide.

    Each layer's weights are prefetched while the previous layer computes, one layer ahead (DeepSpeed stage-3
    prefetch; FSDP forward/backward prefetch, Zhao et al. 2023 §3.3.2): the first gather is exposed, and a later
    layer waits when its collectives take longer than the layer before it computes. In the backward a layer's
    gather and the reduce-scatter of the previous layer's gradients share the DP link; the last reduce-scatter
    ends the pass. ``forward`` and ``backward`` are one layer's seconds (the backward with its recompute).
    """
    fwd = gather + (layers - 1) * max(0.0, gather - forward)
    bwd = gather + (layers - 1) * max(0.0, gather + reduce - backward) + reduce
    return fwd, bwd


def _zero3_passes(model: ModelSpec, cluster: ClusterSpec, s: Plan,
                  passes: dict[PassKey, PassCost]) -> dict[PassKey, PassCost]:
    """The passes of a ZeRO-3 plan (pp = 1: one chunk of every layer) with their exposed DP communication."""
    n = model.layers
    gather, reduce = zero3_layer_gather(model, cluster, s), zero3_layer_reduce(model, cluster, s)
    shape = _dp_shape(cluster, s)
    # the embedding and output weights (not a transformer layer) are gathered and reduced once per pass, exposed
    others = stage_params(model, s, 0) - n * model.layer_params() / s.tp
    g_other = policy.all_gather(cluster, shape, PARAM_BYTES * others, s.collective_policy)
    r_other = grad_reduce_time(cluster, shape, s, others)
    if s.zero3_per_tensor:
        # DeepSpeed 2021: blocking per-tensor collectives, nothing hidden (autoplan/families/transformer/zero3_tensors.py)
        forward, regather = zero3_tensors.layer_gathers(model, cluster, s, shape)
        fwd, bwd = zero3_tensors.exposed(n, forward, regather, zero3_tensors.layer_reduce(model, cluster, s, shape))
    else:
        # one layer's seconds: a middle chunk of a pp = 1 plan has every layer and no embedding or output layer
        fwd, bwd = zero3_exposed(n, passes[(True, False, False)].seconds / n,
                                 passes[(False, False, False)].seconds / n, gather, reduce)
    out = {}
    for key, cost in passes.items():
        first_or_last = key[1] or key[2]
        extra = (fwd if key[0] else bwd) + (g_other + (0.0 if key[0] else r_other) if first_or_last else 0.0)
        out[key] = with_part(cost, "dp", extra)
    return out


@under_graphs
def step_costs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> StepCosts:
    """Seconds of every task kind of one step of plan ``s`` (which must be valid)."""
    p, group = s.pp, s.dp * s.cp
    grads = network.group_shape(cluster.domain_gpus, group, network.stride(s, "cp"))
    if s.zero == 3 and group > 1:
        return _zero3_step(model, cluster, s)
    chunk = chunk_params(model, s)
    # bucket-sized pieces of a chunk's last backward, each reducing its gradients as it ends (ZeRO < 2); ZeRO-2
    # reduce-scatters after every backward, the last included (Rajbhandari et al. 2020 §5.2), so no pieces
    segments = _segments(chunk, s) if (group > 1 and s.overlap_grad_reduce and s.zero < 2) else 0
    per_layer = model.layer_params()
    params = [_stage_params(model, s, i, per_layer) for i in range(p)]
    reduce_all = final_gather = None
    if not segments and s.zero < 2 and group > 1:
        # gradient reduction after the whole backward (no overlap): one collective per DDP bucket (Li et al.
        # 2020, PyTorch Distributed, VLDB 13(12) §3.2.3 bucketing; Megatron-LM DDP)
        counts = [max(1, math.ceil(x / bucket_params(s))) for x in params]
        reduce_all = tuple(grad_reduce_time(cluster, grads, s, x / n) * n for x, n in zip(params, counts))
    if s.zero >= 1 and group > 1 and not s.overlap_param_gather:
        # Megatron-LM distributed optimizer docs: the updated bf16 shards are all-gathered after the step
        final_gather = tuple(policy.all_gather(cluster, grads, param_bytes(s) * x, s.collective_policy) for x in params)
    tied = None
    if model.tied_embeddings and p > 1 and not holds_output(s.schedule, 0, p):
        # the first and last stage hold the tied embedding and all-reduce its gradient (Megatron-LM
        # finalize_model_grads, _allreduce_word_embedding_grads)
        pair = network.group_shape(cluster.domain_gpus, 2, network.stride(s, "pp") * (p - 1))
        tied = network.all_reduce(cluster, pair, grad_bytes(s) * model.vocab * model.hidden / s.tp)
    passes, optimizer = defer_output_wgrad(model, cluster, s, pass_costs(model, cluster, s),
                                           tuple(_optimizer(cluster, s, x) for x in params))
    passes = fp8_scaling.with_reductions(passes, fp8_scaling.reduction_seconds(cluster, s))
    gather = (policy.all_gather(cluster, grads, param_bytes(s) * chunk, s.collective_policy)
              if s.zero >= 1 and s.overlap_param_gather and group > 1 else None)
    return StepCosts(
        passes=passes,
        optimizer=optimizer,
        hop=pp_hop_time(model, cluster, s, network.shape_of(cluster, s, "pp").nodes == 1) if p > 1 else 0.0,
        segments=segments,
        segment_reduce=grad_reduce_time(cluster, grads, s, chunk / segments) if segments and s.zero < 2 else None,
        # overlapped all-gather of a chunk's sharded weights before its first forward (ZeRO >= 1; Megatron-Core
        # --overlap-param-gather), bucket by bucket
        param_gather=gather, param_gather_lead=gather_lead(gather, passes, chunk, s),
        # Rajbhandari et al. 2020 (ZeRO) §5.2-5.3: stage 2/3 reduce-scatter after every backward, 3 gathers weights
        shard_gather=(policy.all_gather(cluster, grads, param_bytes(s) * chunk, s.collective_policy)
                      if s.zero == 3 else 0.0),
        shard_reduce=grad_reduce_time(cluster, grads, s, chunk) if s.zero >= 2 else 0.0,
        reduce_all=reduce_all, final_gather=final_gather, tied=tied,
        weight_grad=weight_grad_costs(model, cluster, s) if s.schedule in SPLIT_BACKWARD else None)


def _zero3_step(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> StepCosts:
    """A ZeRO-3 step: per-layer gathers and reduce-scatters inside the passes (``_zero3_passes``); the weights
    stay sharded, so no gather after the optimizer step (Rajbhandari et al. 2020 §5.3)."""
    params = [_stage_params(model, s, i, model.layer_params()) for i in range(s.pp)]
    # DeepSpeed 2021 re-gathers its persistent parameters after every step (autoplan/families/transformer/zero3_tensors.py)
    after = zero3_tensors.persistent_gather(model, cluster, s, _dp_shape(cluster, s)) if s.zero3_per_tensor else 0.0
    passes = fp8_scaling.with_reductions(_zero3_passes(model, cluster, s, pass_costs(model, cluster, s)),
                                         fp8_scaling.reduction_seconds(cluster, s))
    return StepCosts(passes=passes,
                     optimizer=tuple(_optimizer(cluster, s, x) + after for x in params), hop=0.0, segments=0,
                     segment_reduce=None, param_gather=None, shard_gather=0.0, shard_reduce=0.0, reduce_all=None,
                     final_gather=None, tied=None)


@under_graphs
def lower_bound(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """Seconds the busiest stage's compute stream needs (its passes and optimizer): never above the step time."""
    # a stream's busy time bounds the critical path from below (Graham 1969, list-scheduling bounds)
    worst = 0.0
    for i, passes in _stage_passes(model, cluster, pass_key(s)):
        # each chunk runs every micro-batch (DualPipe: each direction's half, model_copies)
        busy = s.micro_batches / model_copies(s.schedule) * passes
        busy += optimizer_seconds(model, cluster, s, i)
        worst = max(worst, busy)
    return worst


@under_graphs
def quick_bound(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """``lower_bound`` without the end stages' embedding and output layers, the optimizer and the host floor: one
    layer shape's terms, not each pass key's passes (about 10 µs a plan against 46 for GPT-3's space). The search
    orders plans by it and asks ``lower_bound`` only of the plans it reaches."""
    # the busiest rank holds at least the mean layer count over its chunks, copies·layers/pp, and runs each chunk's
    # layers for micro_batches/copies micro-batches (DualPipe: two copies, each direction half the micro-batches)
    return s.micro_batches * model.layers / s.pp * layer_pass_seconds(model, cluster, s)


@lru_cache(maxsize=4096)
def _stage_passes(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> tuple[tuple[int, float], ...]:
    """Per stage that can be the busiest, the seconds of one micro-batch's passes through all its chunks (plans of
    one ``pass_key`` share them)."""
    costs = pass_costs(model, cluster, s)
    p, v = s.pp, s.chunks
    # DualPipe(V)'s fused pairs may hide all of a pass's communication (DeepSeek-V3 §3.2.1): only compute is certain
    seconds = _compute_seconds if s.schedule in FUSED_PAIRS else (lambda c: c.seconds)
    return tuple((i, sum(seconds(costs[(fwd, *ends(s.schedule, virtual_stage(s.schedule, i, c, p), p, v))])
                         for c in range(v) for fwd in (True, False))) for i in _end_stages(s))


def _compute_seconds(c: PassCost) -> float:
    return sum(x for k, x in c.parts if k in COMPUTE_KINDS)


def _end_stages(s: Plan) -> tuple[int, ...]:
    """Stages that can be the busiest: the first and last, and a middle one when the ends hold fewer layers."""
    if s.pp == 1:
        return (0,)
    return (0, s.pp - 1, 1) if s.uneven and s.pp > 2 else (0, s.pp - 1)


def collectives(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[CommNeed]:
    """The collectives and transfers of plan ``s``, one entry per kind, as ``autoplan check`` lists them."""
    out = []
    if s.tp > 1:
        tp = network.shape_of(cluster, s, "tp")
        coll = layer(model, cluster, s).forward_collectives
        # Shoeybi et al. 2019 §3: two TP collectives per layer and pass (four with SP, Korthikanti et al. 2022 §4.2.2)
        for c in coll[:2]:
            out.append(CommNeed(group="tp", op=c.kind, shape=tp, nbytes=c.nbytes,
                                seconds=policy.COLLECTIVES[c.kind](cluster, tp, c.nbytes, s.collective_policy),
                                when=f"{len(coll) // 2}× per layer and pass"))
    if s.cp > 1:
        cp = network.shape_of(cluster, s, "cp")
        a2a = cp_a2a_degree(s, cluster.domain_gpus)
        if a2a > 1:
            q, _ = ulysses_bytes(model, s)
            group = network.group_shape(cluster.domain_gpus, a2a, network.stride(s, "cp"))
            out.append(CommNeed(group="cp", op="all_to_all", shape=group, nbytes=q,
                                seconds=network.all_to_all(cluster, group, q),
                                when="4× per layer and pass (Ulysses: Q, K, V, output; K, V smaller with GQA)"))
        kv = cp_kv_bytes(model, s)
        if s.cp // a2a > 1:
            out.append(CommNeed(group="cp", op="send_recv", shape=cp, nbytes=kv,
                                seconds=network.send_recv(cluster, cp.nodes == 1, kv),
                                when=f"{s.cp // a2a - 1}× per layer (ring K/V)"))
    if s.pp > 1:
        out += _pp_needs(model, cluster, s)
    if s.dp * s.cp > 1:
        out += _dp_needs(model, cluster, s)
    return out


def _pp_needs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[CommNeed]:
    pp = network.shape_of(cluster, s, "pp")
    act = pp_activation_bytes(model, s) / s.tp
    out = [CommNeed(group="pp", op="send_recv", shape=pp, nbytes=act,
                    seconds=network.send_recv(cluster, pp.nodes == 1, act),
                    when="per micro-batch and chunk" + (", blocks the sender's compute" if s.synchronous_p2p else ""))]
    if s.tp > 1 and not s.sequence_parallel:
        tp = network.shape_of(cluster, s, "tp")
        out.append(CommNeed(group="tp", op="all_gather", shape=tp, nbytes=act * s.tp,
                            seconds=policy.all_gather(cluster, tp, act * s.tp, s.collective_policy),
                            when="after each PP receive (scatter/gather)"))
    return out


def _zero3_tensor_needs(model: ModelSpec, cluster: ClusterSpec, s: Plan,
                        shape: network.GroupShape) -> list[CommNeed]:
    """DeepSpeed-2021 ZeRO-3: one layer's per-tensor gathers and reduce-scatters, summed (``zero3_tensors``)."""
    gathered = sum(t for m in model.layer_tensors() for t in m if t > zero3_tensors.PERSISTENCE_THRESHOLD)
    forward, regather = zero3_tensors.layer_gathers(model, cluster, s, shape)
    when = "per layer, one blocking list collective per tensor, "
    return [CommNeed(group="dp", op="all_gather", shape=shape, nbytes=PARAM_BYTES * gathered / s.tp, seconds=forward,
                     when=when + "before its forward and again before its backward"
                          + (f" (+{regather * 1e3:.0f} ms re-gathered after recompute)" if regather else "")),
            CommNeed(group="dp", op="reduce_scatter", shape=shape, nbytes=grad_bytes(s) * model.layer_params() / s.tp,
                     seconds=zero3_tensors.layer_reduce(model, cluster, s, shape), when=when + "after its backward")]


def _dp_needs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[CommNeed]:
    grads = network.group_shape(cluster.domain_gpus, s.dp * s.cp, network.stride(s, "cp"))
    if s.zero == 3 and s.zero3_per_tensor:
        return _zero3_tensor_needs(model, cluster, s, grads)
    if s.zero == 3:
        layer_params = model.layer_params() / s.tp
        return [CommNeed(group="dp", op="all_gather", shape=grads, nbytes=PARAM_BYTES * layer_params,
                         seconds=zero3_layer_gather(model, cluster, s),
                         when="per layer and micro-batch, before its forward and again before its backward"),
                CommNeed(group="dp", op="reduce_scatter", shape=grads, nbytes=grad_bytes(s) * layer_params,
                         seconds=zero3_layer_reduce(model, cluster, s), when="per layer and micro-batch, after its "
                                                                              "backward")]
    params = max(stage_params(model, s, i) for i in _end_stages(s))
    bucket = min(params, bucket_params(s))
    op = "reduce_scatter" if s.zero >= 1 else "all_reduce"
    nbytes = grad_bytes(s) * bucket
    out = [CommNeed(group="dp", op=op, shape=grads, nbytes=nbytes,
                    seconds=policy.COLLECTIVES[op](cluster, grads, nbytes, s.collective_policy),
                    when=f"per bucket, {params / bucket:.0f} buckets")]
    if s.zero >= 1:
        out.append(CommNeed(group="dp", op="all_gather", shape=grads, nbytes=param_bytes(s) * bucket,
                            seconds=policy.all_gather(cluster, grads, param_bytes(s) * bucket, s.collective_policy),
                            when="per bucket, params"))
    return out
