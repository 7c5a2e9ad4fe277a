"""Lower (model, cluster, strategy) into tasks for one representative pipeline.

Every DP replica, CP rank and TP rank of a stage behaves alike, so we simulate one pipeline of pp devices and
let each collective carry its group's cost: the cost of a simulation does not grow with dp or the GPU count.
Layers compose hierarchically (DistSim): a layer's kernels and TP collectives form a layer event, a chunk's
layers form one pass on the stage's compute stream; PP transfers and DP reductions are separate events on
their own streams, overlapping with compute where Megatron-LM overlaps them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from autoplan.cost import compute, network
from autoplan.cost.compute import Collective, LayerCompute
from autoplan.sim.engine import Tasks
from autoplan.sim.schedule import stage_order
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.strategy import Strategy

GRAD_BYTES = 4          # Megatron-LM reduces bf16 models' gradients in fp32 (accumulate_allreduce_grads_in_fp32)
PARAM_BYTES = 2         # bf16 weights, all-gathered after a sharded optimizer step
BUCKET_PARAMS = 40e6    # Megatron-LM DDP bucket size: max(40M, 1M·dp) parameters
MAX_BUCKETS = 8         # finer buckets change the overlap by less than a bucket's reduce time


@dataclass(frozen=True, slots=True)
class PassCost:
    """Seconds of one chunk pass on the compute stream, and how they split by kind."""

    seconds: float
    parts: tuple[tuple[str, float], ...]


@dataclass(slots=True)
class Lowered:
    """The task graph of one step, with what the metrics and the trace need to read it."""

    tasks: Tasks
    stages: int
    compute_streams: list[int]
    parts: dict[int, tuple[tuple[str, float], ...]]
    """Breakdown of compute-stream tasks by kind (compute, recompute, tp, cp, optimizer)."""
    meta: dict[int, tuple]
    """(stage, forward, micro_batch, chunk) of each pass task."""


def _collectives_time(cluster: ClusterSpec, shape: network.GroupShape, colls: tuple[Collective, ...]) -> float:
    return sum(network.COLLECTIVES[c.kind](cluster, shape, c.nbytes) for c in colls)


@lru_cache(maxsize=4096)
def pass_costs(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> dict[tuple[bool, bool, bool], PassCost]:
    """Cost of a forward / backward chunk pass, keyed by (forward, holds embedding, holds output layer)."""
    layer = compute.layer_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch, s.recompute)
    tp = network.shape_of(cluster, s, "tp")
    cp_fwd = cp_bwd = 0.0
    if s.cp > 1:
        # ring attention (Liu et al. 2023): cp−1 K/V block exchanges overlap the blockwise attention compute
        kv = 2 * compute.BF16 * s.micro_batch * (model.seq_len // s.cp) * model.kv_dim // s.tp
        same_node = network.shape_of(cluster, s, "cp").nodes == 1
        hop = network.send_recv(cluster, same_node, kv)
        cp_fwd = max(0.0, (s.cp - 1) * hop - layer.attention_forward * (s.cp - 1) / s.cp) + hop / s.cp
        cp_bwd = max(0.0, 2 * (s.cp - 1) * hop - 2.5 * layer.attention_forward * (s.cp - 1) / s.cp) + hop / s.cp
    n = model.layers // (s.pp * s.chunks)
    fwd = LayerCompute.seconds(layer.forward)
    fwd_tp = _collectives_time(cluster, tp, layer.forward_collectives)
    bwd = LayerCompute.seconds(layer.backward)
    bwd_tp = _collectives_time(cluster, tp, layer.backward_collectives)
    rec = LayerCompute.seconds(layer.recompute)
    rec_tp = _collectives_time(cluster, tp, layer.recompute_collectives)
    emb_f, emb_b, emb_c = compute.embedding_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch)
    out_f, out_b, out_c = compute.output_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch)
    emb_tp, out_tp = _collectives_time(cluster, tp, emb_c), _collectives_time(cluster, tp, out_c)
    costs = {}
    for first in (False, True):
        for last in (False, True):
            f_comp = n * fwd + first * LayerCompute.seconds(emb_f) + last * LayerCompute.seconds(out_f)
            f_tp = n * fwd_tp + first * emb_tp + last * out_tp
            costs[(True, first, last)] = _pass(("compute", f_comp), ("tp", f_tp), ("cp", n * cp_fwd))
            b_comp = n * bwd + first * LayerCompute.seconds(emb_b) + last * LayerCompute.seconds(out_b)
            b_tp = n * (bwd_tp + rec_tp) + last * out_tp
            costs[(False, first, last)] = _pass(("compute", b_comp), ("recompute", n * rec), ("tp", b_tp),
                                                ("cp", n * (cp_bwd + (cp_fwd if s.recompute == "full" else 0))))
    return costs


def _pass(*parts: tuple[str, float]) -> PassCost:
    kept = tuple(p for p in parts if p[1] > 0)
    return PassCost(sum(p[1] for p in kept), kept)


def stage_params(model: ModelSpec, s: Strategy, stage: int) -> float:
    """Parameters one GPU of ``stage`` holds (its share of the TP-sharded layers, embedding and output)."""
    params = model.layers // s.pp * model.layer_params() / s.tp
    if stage == 0:
        params += model.embedding_params() / s.tp
    if stage == s.pp - 1:
        params += model.output_params() / s.tp
        if model.tied_embeddings and s.pp > 1:
            params += model.vocab * model.hidden / s.tp
    return params


def lower(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> Lowered:
    """The tasks of one training step of plan ``s`` (which must be valid)."""
    p, v, m = s.pp, s.chunks, s.micro_batches
    costs = pass_costs(model, cluster, s)
    tasks = Tasks()
    orders = [stage_order(s.schedule, i, p, m, v) for i in range(p)]
    comp = [tasks.stream(f"stage{i}.compute") for i in range(p)]
    fwd_link = [tasks.stream(f"stage{i}.pp_send_fwd") for i in range(p)]
    bwd_link = [tasks.stream(f"stage{i}.pp_send_bwd") for i in range(p)]
    dp_stream = [tasks.stream(f"stage{i}.dp") for i in range(p)]
    pp_shape = network.shape_of(cluster, s, "pp")
    act_bytes = compute.BF16 * s.micro_batch * (model.seq_len // s.cp) * model.hidden / s.tp   # scatter/gather
    hop = network.send_recv(cluster, pp_shape.nodes == 1, act_bytes) if p > 1 else 0.0
    grad_shape = network.group_shape(cluster.gpus_per_node, s.dp * s.cp, network.stride(s, "cp"))
    last_vs = p * v - 1
    parts: dict[int, tuple] = {}
    meta: dict[int, tuple] = {}
    split: dict[int, int] = _grad_segments(model, s) if (s.dp * s.cp > 1 and s.overlap_grad_reduce) else {}
    last_backward = _last_backward_steps(orders) if split else {}
    dp_tasks: list[list[int]] = [[] for _ in range(p)]
    gather_first: dict[tuple[int, int], int] = _param_gathers(model, cluster, s, tasks, dp_stream, grad_shape,
                                                              dp_tasks)
    chunk_params = model.layers // (p * v) * model.layer_params() / s.tp
    shard_reduce = _grad_reduce_time(cluster, grad_shape, s, chunk_params) if s.zero >= 2 else 0.0
    shard_gather = network.all_gather(cluster, grad_shape, PARAM_BYTES * chunk_params) if s.zero == 3 else 0.0
    sent: dict[tuple[bool, int, int], int] = {}          # (forward, micro-batch, virtual stage) -> arriving send
    waiting: dict[tuple[bool, int, int], list[int]] = {}  # the same key -> deps of a pass created before its send
    add, last_task = tasks.add, [0] * p
    t_res, t_dur, t_deps, t_kind, t_label = tasks.resource, tasks.duration, tasks.deps, tasks.kind, tasks.label
    tables = [{(fwd, c): costs[(fwd, c * p + i == 0, c * p + i == last_vs)] for fwd in (True, False)
               for c in range(v)} for i in range(p)]
    # stages take turns step by step, so most dependencies already exist when a task is added (engine fast path)
    for st, i in _round_robin(orders):
        stream, dp_i, table = comp[i], dp_stream[i], tables[i]
        fwd, mb, chunk = st
        vs = chunk * p + i
        cost = table[(fwd, chunk)]
        key = (fwd, mb, vs)
        arrived = sent.pop(key, None)
        if arrived is None:
            d: list[int] = []
            waiting[key] = d
        else:
            d = [arrived]
        if fwd and mb == 0 and (i, chunk) in gather_first:
            d.append(gather_first[(i, chunk)])
        if shard_gather:
            # ZeRO-3 gathers a chunk's weights before every pass (Rajbhandari et al. 2020, §5.3)
            d.append(add(dp_i, shard_gather, (), "dp", None))
        if not fwd and split and last_backward[(i, chunk)] == mb:
            last = _segmented_backward(tasks, stream, dp_i, cost, split[chunk], d, grad_shape, cluster, model, s,
                                       parts, dp_tasks[i], meta, (i, False, mb, chunk))
        else:
            last = len(t_dur)
            t_res.append(stream)
            t_dur.append(cost.seconds)
            t_deps.append(d)
            t_kind.append("pass")
            t_label.append(None)
            parts[last] = cost.parts
            meta[last] = (i, fwd, mb, chunk)
            if shard_reduce and not fwd:
                # ZeRO-2/3 reduce-scatter gradients after every micro-batch (Rajbhandari et al. 2020, §5.2)
                dp_tasks[i].append(add(dp_i, shard_reduce, (last,), "dp", None))
        last_task[i] = last
        if fwd and vs < last_vs:
            target = (True, mb, vs + 1)
            t_res.append(fwd_link[i])
        elif not fwd and vs > 0:
            target = (False, mb, vs - 1)
            t_res.append(bwd_link[i])
        else:
            continue
        send = len(t_dur)
        t_dur.append(hop)
        t_deps.append((last,))
        t_kind.append("pp")
        t_label.append(None)
        consumer = waiting.pop(target, None)
        if consumer is None:
            sent[target] = send
        else:
            consumer.append(send)
    for i in range(p):
        last_pass = last_task[i]
        if not split and s.zero < 2 and s.dp * s.cp > 1:
            _reduce_all(tasks, dp_stream[i], last_pass, stage_params(model, s, i), grad_shape, cluster, s,
                        dp_tasks[i])
        if model.tied_embeddings and p > 1 and i in (0, p - 1):
            emb_grad = GRAD_BYTES * model.vocab * model.hidden / s.tp
            t = network.all_reduce(cluster, network.group_shape(cluster.gpus_per_node, 2, network.stride(s, "pp")
                                                                * (p - 1)), emb_grad)
            dp_tasks[i].append(tasks.add(dp_stream[i], t, (last_pass,), "dp", None))
        params = stage_params(model, s, i)
        sharded = params / (s.dp * s.cp) if s.zero >= 1 else params
        opt = tasks.add(comp[i], compute.optimizer_time(cluster.gpu, params, sharded), tuple(dp_tasks[i]) + (last_pass,),
                        "optimizer", None)
        parts[opt] = (("optimizer", tasks.duration[opt]),)
        if s.zero >= 1 and s.dp * s.cp > 1 and not s.overlap_param_gather:
            tasks.add(dp_stream[i], network.all_gather(cluster, grad_shape, PARAM_BYTES * params), (opt,), "dp", None)
    return Lowered(tasks, p, comp, parts, meta)


def _round_robin(orders: list) -> list[tuple]:
    """(step, stage) pairs: every stage's first step, then every stage's second, …; each stage keeps its order."""
    longest = max(len(o) for o in orders)
    return [(o[k], i) for k in range(longest) for i, o in enumerate(orders) if k < len(o)]


def _grad_segments(model: ModelSpec, s: Strategy) -> dict[int, int]:
    per_chunk = model.layers // (s.pp * s.chunks) * model.layer_params() / s.tp
    bucket = max(BUCKET_PARAMS, 1e6 * s.dp * s.cp)
    n = min(MAX_BUCKETS, max(1, math.ceil(per_chunk / bucket)))
    return {c: n for c in range(s.chunks)}


def _last_backward_steps(orders: list) -> dict[tuple[int, int], int]:
    last: dict[tuple[int, int], int] = {}
    for i, order in enumerate(orders):
        for st in order:
            if not st.forward:
                last[(i, st.chunk)] = st.micro_batch
    return last


def _grad_reduce_time(cluster: ClusterSpec, shape: network.GroupShape, s: Strategy, params: float) -> float:
    nbytes = GRAD_BYTES * params
    if s.zero >= 1:
        return network.reduce_scatter(cluster, shape, nbytes)
    return network.all_reduce(cluster, shape, nbytes)


def _segmented_backward(tasks: Tasks, comp: int, dp: int, cost: PassCost, nseg: int, deps: list[int],
                        shape: network.GroupShape, cluster: ClusterSpec, model: ModelSpec, s: Strategy,
                        parts: dict, dp_tasks: list[int], meta: dict, key: tuple) -> int:
    """The last backward of a chunk, in bucket-sized pieces; each piece's gradients reduce as it ends."""
    params = model.layers // (s.pp * s.chunks) * model.layer_params() / s.tp / nseg
    reduce = _grad_reduce_time(cluster, shape, s, params)
    share = tuple((k, v / nseg) for k, v in cost.parts)
    last = -1
    for j in range(nseg):
        last = tasks.add(comp, cost.seconds / nseg, deps if j == 0 else (), "pass")
        parts[last] = share
        meta[last] = key
        if s.zero < 2:
            dp_tasks.append(tasks.add(dp, reduce, (last,), "dp", None))
    return last


def _reduce_all(tasks: Tasks, dp: int, after: int, params: float, shape: network.GroupShape, cluster: ClusterSpec,
                s: Strategy, dp_tasks: list[int]) -> None:
    """Gradient reduction after the whole backward (no overlap): one collective per bucket."""
    n = max(1, math.ceil(params / max(BUCKET_PARAMS, 1e6 * s.dp * s.cp)))
    t = _grad_reduce_time(cluster, shape, s, params / n) * n
    dp_tasks.append(tasks.add(dp, t, (after,), "dp", None))


def _param_gathers(model: ModelSpec, cluster: ClusterSpec, s: Strategy, tasks: Tasks, dp_stream: list[int],
                   shape: network.GroupShape, dp_tasks: list[list[int]]) -> dict[tuple[int, int], int]:
    """Overlapped all-gather of sharded parameters before each chunk's first forward (ZeRO ≥ 1)."""
    if not (s.zero >= 1 and s.overlap_param_gather and s.dp * s.cp > 1):
        return {}
    out = {}
    per_chunk = model.layers // (s.pp * s.chunks) * model.layer_params() / s.tp
    t = network.all_gather(cluster, shape, PARAM_BYTES * per_chunk)
    for i in range(s.pp):
        for c in range(s.chunks):
            out[(i, c)] = tasks.add(dp_stream[i], t, (), "dp", None)
    return out
