"""A DLRM's embedding sharding plan: per-table sharding kinds placed on GPUs, the per-GPU loads they add up to, the
step time those loads give (one critical path per micro-batch), and the planner that picks each table's sharding
(greedy by cost, then local search, within each GPU's memory)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from autoplan.hardware import compute, network, policy
from autoplan.families.dlrm.embedding import (ID_BYTES, hot_bytes, lookup_bytes, lookup_seconds, output_bytes,
                                              shard_bytes, shards_of)
from autoplan.specs.cluster import ClusterSpec
from autoplan.families.dlrm.spec import DLRMSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

GRAD_BYTES = 4
"""Bytes per dense gradient value in the data-parallel all-reduce (fp32)."""
DENSE_STATE_BYTES = 12
"""Bytes per dense (MLP, data-parallel table) parameter: fp32 weight, gradient and Adagrad accumulator."""
ACT_BYTES = 2
"""Bytes per MLP activation value (AMP fp16, as in every NVIDIA DeepLearningExamples DLRM run)."""
EPILOGUE_FWD_PASSES = 2
"""Bias + ReLU after each GEMM, in place: read and write the output (apex csrc/mlp_cuda.cu mlp_fp: cuBLASLt's fused
epilogue is tried only without an activation; with ReLU a cuBLAS GEMM is followed by the biasAddRelu_fprop kernel)."""
EPILOGUE_BWD_PASSES = 3
"""Its backward: read the gradient and the output, write the masked gradient (apex mlp_cuda.cu biasAddRelu_bprop)."""
HOROVOD_CYCLE = 1e-3
"""Seconds between two negotiation rounds of Horovod's background thread: 1 ms by default since Horovod 0.21 (release
notes, PR #2468; operations.cc BackgroundThreadLoop ``SetCycleTimeMs(1)``, 5 ms before), unless HOROVOD_CYCLE_TIME
sets it."""
SEARCH_PASSES = 4
"""Local-search sweeps over the tables at most (each sweep tries every other sharding of every table)."""


@dataclass(frozen=True, slots=True)
class TablePlan:
    """One table's sharding and the GPUs its shards sit on."""

    kind: str
    gpus: tuple[int, ...]


@dataclass
class Loads:
    """What every GPU does for the embedding tables in one micro-batch, summed over the placed shards."""

    world: int
    lookup_s: list[float]
    """Forward lookup seconds per GPU."""
    lookup_b: list[float]
    """Forward lookup bytes per GPU (hardware-free)."""
    send: list[float]
    """All-to-all bytes each GPU sends (pooled embeddings of its table-wise and column-wise shards)."""
    recv: list[float]
    """All-to-all bytes each GPU receives."""
    memory: list[float]
    """Embedding bytes each GPU stores."""
    ids: list[float] = field(default_factory=list)
    """Input-distribution bytes (lookup indices) each GPU receives."""
    row_wise: float = 0.0
    """Reduce-scatter bytes per GPU over all GPUs (row-wise tables)."""
    node_rs: float = 0.0
    """Reduce-scatter bytes per GPU inside a node (table-row-wise tables; the busiest node)."""
    node_rs_by_node: list[float] = field(default_factory=list)
    dp_params: float = 0.0
    """Values of data-parallel tables (their gradients join the dense all-reduce)."""
    write_b: list[float] = field(default_factory=list)
    """Pooled-output bytes each GPU's forward lookups write (hardware-free)."""
    hot_b: list[float] = field(default_factory=list)
    """Of ``lookup_b``, the bytes of rows found in the GPU's L2 (Zipf skew and the L2's size)."""

    @classmethod
    def empty(cls, world: int, nodes: int) -> "Loads":
        z = [0.0] * world
        return cls(world, z[:], z[:], z[:], z[:], z[:], z[:], node_rs_by_node=[0.0] * nodes, write_b=z[:],
                   hot_b=z[:])


@dataclass(frozen=True)
class Context:
    """Everything a plan's step time needs besides the plan: model, cluster, micro-batch, dense-layer times."""

    model: ModelSpec
    cluster: ClusterSpec
    strategy: Plan
    dense_fwd: tuple[float, float, float]
    """Forward seconds of the bottom MLP, the interaction and the top MLP for one micro-batch."""
    dense_bwd: tuple[float, float, float]

    @property
    def spec(self) -> DLRMSpec:
        return self.model.structure

    @property
    def world(self) -> int:
        return self.strategy.dp

    @property
    def node_size(self) -> int:
        return min(self.world, self.cluster.domain_gpus)

    @property
    def rank0(self) -> bool:
        """The bottom MLP runs on GPU 0 alone over the global batch (``DLRMSpec.bottom_mlp_placement``)."""
        return self.spec.bottom_mlp_placement == "rank0" and self.world > 1

    @property
    def batch(self) -> int:
        """Samples of one micro-batch over all GPUs."""
        return self.strategy.dp * self.strategy.micro_batch

    @cached_property
    def groups(self) -> tuple[network.GroupShape, network.GroupShape]:
        """The all-GPU group and one node's group (``step_times`` prices a plan's collectives on them)."""
        domain = self.cluster.domain_gpus
        return network.group_shape(domain, self.world, 1), network.group_shape(domain, self.node_size, 1)

    @cached_property
    def dense_params(self) -> int:
        """``DLRMSpec.dense_params``, kept (the planner prices thousands of candidate shardings)."""
        return self.spec.dense_params()


def epilogue_times(cluster: ClusterSpec, b: int, n: int) -> tuple[float, float]:
    """Forward and backward seconds of one layer's bias + activation over a (b×n) output: memory-bound element-wise
    kernels, one each way (Lin et al. 2022 §IV-D: the "other" ops priced by the bytes they move)."""
    gpu, nbytes = cluster.gpu, b * n * ACT_BYTES
    return (compute.memory_time(gpu, EPILOGUE_FWD_PASSES * nbytes),
            compute.memory_time(gpu, EPILOGUE_BWD_PASSES * nbytes))


def _mlp_times(cluster: ClusterSpec, widths: tuple[int, ...], b: int) -> tuple[float, float]:
    gpu = cluster.gpu
    fwd = bwd = 0.0
    for k, n in zip(widths, widths[1:]):
        # forward (b×k)·(k×n); backward dgrad and wgrad, about twice the forward (Naumov et al. 2019 §2)
        fwd += compute.gemm_time(gpu, b, n, k)
        bwd += compute.gemm_time(gpu, b, k, n) + compute.gemm_time(gpu, k, n, b)
        # the bias + ReLU (sigmoid + loss on the last layer) outside the GEMM (apex mlp_cuda.cu mlp_fp / mlp_bp, which
        # NVIDIA DLRM's CppMlp in dlrm/nn/mlps.py calls)
        ef, eb = epilogue_times(cluster, b, n)
        fwd, bwd = fwd + ef, bwd + eb
    return fwd, bwd


def interaction_input_times(cluster: ClusterSpec, spec: DLRMSpec, b: int) -> tuple[float, float]:
    """Seconds of building the interaction's input: the pooled embeddings cast from the table's precision to the
    AMP activation precision and concatenated with the bottom MLP's output (torch.cat: read and write every value);
    backward casts their gradient back (Lin et al. 2022 §IV-D "other" ops; NVIDIA DLRM interaction.py)."""
    gpu, d = cluster.gpu, spec.bottom_mlp[-1]
    pooled = b * (spec.features - 1) * d
    cast = pooled * (spec.embedding_bytes + ACT_BYTES) if spec.embedding_bytes != ACT_BYTES else 0.0
    concat = 2 * b * spec.features * d * ACT_BYTES
    kernels = 1 + (cast > 0)
    return compute.memory_time(gpu, cast + concat, kernels), compute.memory_time(gpu, cast, 1) if cast else 0.0


def _interaction_times(cluster: ClusterSpec, spec: DLRMSpec, b: int) -> tuple[float, float]:
    gpu = cluster.gpu
    if spec.interaction == "dot":
        f, d = spec.features, spec.bottom_mlp[-1]
        # Z = X·Xᵀ per sample, a batched (F×D)·(D×F) GEMM (DLRM reference interact_features); backward two GEMMs
        fwd = compute.gemm_time(gpu, f, f, d, b)
        return fwd, 2 * fwd
    w, r = spec.interaction_width, spec.cross_rank
    # DCN-v2 low-rank cross layer: (b×W)·(W×r) then (b×r)·(r×W) (Wang et al. 2021, eq. 2)
    fwd = spec.cross_layers * (compute.gemm_time(gpu, b, r, w) + compute.gemm_time(gpu, b, w, r))
    return fwd, 2 * fwd


@lru_cache(maxsize=1024)
def context(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> Context:
    """The dense-layer times of ``model`` at ``s``'s micro-batch, with the model and cluster."""
    spec, b = model.structure, s.micro_batch
    # rank0: GPU 0 runs the bottom MLP over every GPU's samples (NVIDIA DLRM dlrm/model/distributed.py DistributedDlrm)
    bottom_batch = b * s.dp if spec.bottom_mlp_placement == "rank0" else b
    bot = _mlp_times(cluster, spec.bottom_widths(), bottom_batch)
    inter = tuple(x + y for x, y in zip(_interaction_times(cluster, spec, b), interaction_input_times(cluster, spec, b)))
    top = _mlp_times(cluster, spec.top_widths(), b)
    return Context(model, cluster, s, (bot[0], inter[0], top[0]), (bot[1], inter[1], top[1]))


def bottom_output_bytes(ctx: Context) -> float:
    """All-to-all bytes GPU 0 sends of the rank-0 bottom MLP's output: the global batch's (batch × width) fp16
    activations, scattered to every GPU but the 1/world that stays on GPU 0 (NVIDIA DLRM DistributedDlrm sends the
    bottom MLP output with the pooled embeddings in one all-to-all); 0 for a data-parallel bottom MLP."""
    if not ctx.rank0:
        return 0.0
    return ctx.batch * ctx.spec.bottom_mlp[-1] * ACT_BYTES * (ctx.world - 1) / ctx.world


def start_loads(ctx: Context) -> Loads:
    """Loads before any table is placed: none, or with a rank-0 bottom MLP its output's all-to-all share."""
    loads = Loads.empty(ctx.world, -(-ctx.world // ctx.node_size))
    out = bottom_output_bytes(ctx)
    if out:
        loads.send[0] += out
        for g in range(ctx.world):
            loads.recv[g] += out / (ctx.world - 1) if g else 0.0   # each other GPU: its own samples' rows
    return loads


def node_gpus(ctx: Context, node: int) -> tuple[int, ...]:
    """The GPUs of node ``node``."""
    k = ctx.node_size
    return tuple(range(node * k, min(ctx.world, node * k + k)))


def apply(ctx: Context, loads: Loads, index: int, plan: TablePlan, sign: float = 1.0) -> None:
    """Add (or with ``sign`` -1, remove) table ``index`` sharded as ``plan`` to ``loads``."""
    # sign is ±1.0 and every term is priced in floats from its first factor, so sign · term is the float that
    # pricing the shards inline gave; the planner's local search adds and removes each candidate many times
    shards, recv, row_wise, node_rs, dp_params = footprint(ctx, index, plan.kind, plan.gpus)
    for g, look_s, look_b, write_b, hot, memory, send, ids, dense_grad in shards:
        loads.lookup_s[g] += sign * look_s
        loads.lookup_b[g] += sign * look_b
        loads.write_b[g] += sign * write_b
        loads.hot_b[g] += sign * hot
        loads.memory[g] += sign * memory
        if send is not None:
            loads.send[g] += sign * send
        if ids is not None:
            loads.ids[g] += sign * ids
        if dense_grad is not None:
            loads.memory[g] += sign * dense_grad
    if recv is not None:
        for g in range(ctx.world):
            loads.recv[g] += sign * recv
    if row_wise is not None:
        loads.row_wise += sign * row_wise
    elif node_rs is not None:
        loads.node_rs_by_node[node_rs[0]] += sign * node_rs[1]
        loads.node_rs = max(loads.node_rs_by_node)
    elif dp_params is not None:
        loads.dp_params += sign * dp_params


@lru_cache(maxsize=65536)
def footprint(ctx: Context, index: int, kind: str, gpus: tuple[int, ...]) -> tuple:
    """What table ``index`` sharded as ``kind`` on ``gpus`` adds to the loads: per shard (GPU, lookup seconds,
    lookup bytes, output bytes, L2-hit bytes, stored bytes, all-to-all bytes sent, index bytes received, a
    data-parallel table's dense gradient bytes; None where it adds nothing), the all-to-all bytes every GPU receives,
    and the row-wise, node (table-row-wise: node, bytes) and data-parallel terms."""
    table = ctx.spec.tables[index]
    gpu, e, world, batch = ctx.cluster.gpu, ctx.spec.embedding_bytes, ctx.world, ctx.batch
    local = batch / world
    # bytes per pooled value on the wire: fp32, or the AMP dtype where the code casts before the all-to-all
    # (DLRMSpec.pooled_comm_bytes)
    pooled = ctx.spec.pooled_comm_bytes
    shards = []
    for sh in shards_of(table, index, kind, gpus, world, batch):
        hot = hot_bytes(gpu, sh, e)
        send = ids = None
        if kind in ("table_wise", "column_wise"):
            # the owner sends every sample's pooled vector but the 1/world that stays on it (TorchRec TW/CW a2a)
            send = 1.0 * sh.outputs * sh.width * pooled * (world - 1) / world
            ids = 1.0 * table.pooling * batch * ID_BYTES * (world - 1) / world
        elif kind == "table_row_wise":
            # after the node's reduce-scatter each member holds 1/k of the pooled vectors and sends them on
            send = 1.0 * batch * table.dim * pooled / len(gpus) * (world - 1) / world
            ids = 1.0 * sh.lookups * ID_BYTES
        elif kind == "row_wise":
            ids = 1.0 * sh.lookups * ID_BYTES
        # a data-parallel table also keeps a dense gradient of the whole table
        dense_grad = 1.0 * table.params * GRAD_BYTES if kind == "data_parallel" else None
        shards.append((sh.gpu, lookup_seconds(gpu, sh, e, hot), lookup_bytes(sh, e), output_bytes(sh), hot,
                       shard_bytes(sh, e), send, ids, dense_grad))
    recv = local * table.dim * pooled * (world - 1) / world if kind != "data_parallel" else None
    row_wise = 1.0 * batch * table.dim * pooled if kind == "row_wise" else None
    node_rs = (gpus[0] // ctx.node_size, 1.0 * batch * table.dim * pooled) if kind == "table_row_wise" else None
    dp_params = table.params if kind == "data_parallel" else None
    return tuple(shards), recv, row_wise, node_rs, dp_params


@dataclass(frozen=True, slots=True)
class StepTimes:
    """One micro-batch's forward and backward seconds split by kind, and the step-end reduction and optimizer."""

    fwd_compute: float
    fwd_a2a: float
    bwd_compute: float
    bwd_a2a: float
    reduce: float
    optimizer: float
    micro_batches: int

    @property
    def total(self) -> float:
        """The step: every micro-batch's passes, then the gradient all-reduce and the optimizer."""
        passes = self.fwd_compute + self.fwd_a2a + self.bwd_compute + self.bwd_a2a
        return self.micro_batches * passes + self.reduce + self.optimizer


def step_times(ctx: Context, loads: Loads) -> StepTimes:
    """The step of a sharding plan: per micro-batch a critical path through lookups, communication and MLPs.

    Lin et al. 2022 §III (critical path of the execution graph): the lookups of the busiest GPU, then the
    all-to-all (and reduce-scatters) on the communication stream beside the bottom MLP, then the interaction and
    top MLP; the backward mirrors it, and the embedding update runs after the gradient all-to-all.
    """
    cl, world, pol = ctx.cluster, ctx.world, ctx.strategy.collective_policy
    everyone, node = ctx.groups
    # collectives priced under the plan's collective policy (nccl, or Themis-style chunked schedules: hardware/policy.py)
    a2a = policy.all_to_all(cl, everyone, max(max(loads.send), max(loads.recv)), pol)
    rw = policy.reduce_scatter(cl, everyone, loads.row_wise, pol)
    twrw = policy.reduce_scatter(cl, node, loads.node_rs, pol)
    # under Horovod the forward all-to-all waits for a negotiation round, and so does the backward one, whose round
    # also carries the dense gradients' all-reduce (they are ready together, after the interaction's backward)
    comm = a2a + rw + twrw + horovod_round_wait(ctx.spec, world)
    (bot_f, inter_f, top_f), (bot_b, inter_b, top_b) = ctx.dense_fwd, ctx.dense_bwd
    overhead = cl.gpu.kernel_overhead
    look_f = max(loads.lookup_s) + overhead
    # FBGEMM's fused backward reads each row and its state and writes both back: twice the forward's traffic
    look_b = 2 * max(loads.lookup_s) + overhead
    # the next batch's input distribution (indices) runs during this batch's dense layers (TorchRec
    # TrainPipelineSparseDist); only what exceeds them is exposed, at the end of the backward
    ids = policy.all_to_all(cl, everyone, max(loads.ids), pol)
    dense = ctx.dense_params + loads.dp_params
    if ctx.rank0:
        # GPU 0's bottom MLP (global batch) runs beside the other GPUs' lookups; the all-to-all carries its output,
        # so it waits for it and nothing hides it (NVIDIA DLRM DistributedDlrm.forward: bottom MLP, then
        # bottom_to_top all-to-all); backward mirrors it. Only GPU 0 holds the bottom MLP: no all-reduce of it.
        look_f = max(max(loads.lookup_s), loads.lookup_s[0] + bot_f) + overhead
        look_b = max(2 * max(loads.lookup_s), 2 * loads.lookup_s[0] + bot_b) + overhead
        bot_f = bot_b = 0.0
        hidden = inter_f + top_f + inter_b + top_b
        fwd_a2a, bwd_a2a = comm, comm + max(0.0, ids - hidden)
        reduced = dense - ctx.spec.bottom_params()
    else:
        hidden = bot_f + inter_f + top_f + bot_b + inter_b + top_b
        fwd_a2a = max(0.0, comm - bot_f)
        bwd_a2a = max(0.0, comm - bot_b) + max(0.0, ids - hidden)
        reduced = dense
    reduce = policy.all_reduce(cl, everyone, reduced * GRAD_BYTES, pol) if world > 1 else 0.0
    return StepTimes(fwd_compute=look_f + bot_f + inter_f + top_f, fwd_a2a=fwd_a2a,
                     bwd_compute=top_b + inter_b + bot_b + look_b, bwd_a2a=bwd_a2a, reduce=reduce,
                     optimizer=compute.optimizer_time(cl.gpu, dense, dense),
                     micro_batches=ctx.strategy.micro_batches)


def horovod_round_wait(spec: DLRMSpec, world: int) -> float:
    """Seconds a collective issued through Horovod waits, on average, for its negotiation round to start.

    Horovod's background thread sleeps until a cycle has passed since the last round began, then negotiates every
    operation the ranks have enqueued (operations.cc RunLoopOnce: "this delay determines thread frequency and
    communication message latency"); an operation enqueued at a uniformly random point of the cycle waits half of it.
    On one process Horovod's TensorFlow ops are skipped (distributed-embeddings and the DLRM's trainer.py call them
    only when hvd.size() > 1)."""
    if spec.framework != "horovod" or world <= 1:
        return 0.0
    return HOROVOD_CYCLE / 2


@dataclass(frozen=True, slots=True)
class SymbolicCost:
    """A plan's symbolic counts per step (SMSG-style: the data computed and communicated, with no efficiency, cache
    rate, ramp or launch cost in them); each count over all micro-batches. Bytes are split by the level they cross:
    inside the node (intra) or across nodes, per GPU (inter; 0 on one node). Lookup bytes stay per GPU, so that
    ``seconds`` can take the busiest GPU's time (Lin et al. 2022 §III: the critical path runs through the slowest
    rank), not the busiest GPU by one count."""

    lookup_bytes: float
    """Embedding bytes read in the forward and read and written in the backward (3× the forward's rows), on the
    GPU that reads most."""
    a2a_intra: float
    """All-to-all bytes (pooled embeddings forward, their gradients backward) to peers in the node."""
    a2a_inter: float
    """All-to-all bytes to peers in other nodes."""
    ring_intra: float
    """Reduce-scatter / all-gather bytes of row-wise tables (a ring over every GPU) inside nodes."""
    ring_inter: float
    """Their bytes across nodes."""
    reduce_intra: float
    """Step-end dense all-reduce bytes inside the node."""
    reduce_inter: float
    """Its bytes across nodes."""
    bottom_flops: float
    """Bottom-MLP FLOPs (forward and backward), what the all-to-alls overlap with."""
    mlp_flops: float
    """All MLP and interaction FLOPs (the same under every sharding)."""
    rounds: int
    """Sequential message rounds of the per-micro-batch collectives over all GPUs when they span nodes (n-1 per
    all-to-all or ring, Thakur et al. 2005), all micro-batches: the latency (α) terms of an α-β model."""
    node_rounds: int
    """The same for collectives inside one node: the table-row-wise reduce-scatters, and every collective of a
    one-node plan."""
    node_ring: float = 0.0
    """Reduce-scatter / all-gather bytes of table-row-wise tables (a ring over one node's GPUs)."""
    lookup_cold: tuple[float, ...] = ()
    """Per GPU: HBM bytes of the lookups, forward and backward (3×): rows not found in the L2, pooled outputs."""
    lookup_hot: tuple[float, ...] = ()
    """Per GPU: bytes of rows found in the L2 (its datasheet size, the table's Zipf skew), forward and backward."""
    optimizer_bytes: float = 0.0
    """HBM bytes of the step-end optimizer over the dense parameters and data-parallel tables."""

    @property
    def comm_bytes(self) -> float:
        """Every byte the busiest GPU sends, inside and across nodes."""
        return (self.a2a_intra + self.a2a_inter + self.ring_intra + self.ring_inter + self.node_ring
                + self.reduce_intra + self.reduce_inter)

    @property
    def key(self) -> tuple[float, float]:
        """The hardware-free ranking: fewest bytes sent, then fewest bytes looked up."""
        return self.comm_bytes, self.lookup_bytes

    def lookup_seconds(self, hbm: float, l2: float = 0.0) -> float:
        """The busiest GPU's lookups: HBM bytes at ``hbm`` B/s, L2-resident rows at ``l2`` (0: at the HBM rate)."""
        # the slowest rank bounds the step (Lin et al. 2022 §III); L2 hits at the L2 rate (Lin et al. §IV-B)
        return max((c / hbm + h / (l2 or hbm) for c, h in zip(self.lookup_cold, self.lookup_hot)), default=0.0)

    def seconds(self, hbm: float, intra: float, inter: float, flops: float, latency: float = 0.0,
                node_latency: float = 0.0, l2: float = 0.0) -> float:
        """The counts at datasheet rates (B/s, FLOP/s) and per-round latencies (s), no calibration, on the critical
        path of ``step_times``: the busiest GPU's lookups, each pass's collectives beside its bottom MLP, the rest
        of the MLPs, the step-end all-reduce and optimizer (the all-reduce's rounds, the same under every sharding,
        left out)."""
        # pairwise all-to-all and NCCL rings move both levels at once: the slower one sets the time (Thakur et al.
        # 2005; network.all_to_all, network._ring); the table-row-wise ring inside a node follows
        comm = (max(self.a2a_intra / intra, self.a2a_inter / inter) + max(self.ring_intra / intra,
                self.ring_inter / inter) + self.node_ring / intra + self.rounds * latency
                + self.node_rounds * node_latency)
        # half the collectives run in the forward beside its bottom MLP (1/3 of its FLOPs), half in the backward
        # beside the other 2/3 (two streams: the longer bounds each pass, Lin et al. 2022 §III)
        bottom = self.bottom_flops / flops
        overlap = max(comm / 2, bottom / 3) + max(comm / 2, 2 * bottom / 3)
        rest = (self.mlp_flops - self.bottom_flops) / flops
        reduce = max(self.reduce_intra / intra, self.reduce_inter / inter)
        return self.lookup_seconds(hbm, l2) + overlap + rest + reduce + self.optimizer_bytes / hbm


def symbolic_cost(ctx: Context, loads: Loads) -> SymbolicCost:
    """The counts of ``loads`` under ``ctx``: bytes, FLOPs and the group's shape (members per node); the only
    hardware number behind them is the L2's size (``lookup_hot``; ``key`` does not use it).

    The next micro-batch's index all-to-all (``Loads.ids``) is left out: TorchRec's TrainPipelineSparseDist runs it
    beside this one's dense layers, and their FLOPs at peak rate (a few µs at micro-batch 1024) are no measure of
    how long those small launch-bound kernels hide it."""
    m, world, k = ctx.strategy.micro_batches, ctx.world, ctx.node_size
    a2a = 2 * m * max(max(loads.send), max(loads.recv))
    # ring reduce-scatter and all-gather send (n-1)/n of the buffer, a ring all-reduce 2(n-1)/n (Patarasuk & Yuan
    # 2009); a table-row-wise reduce-scatter runs over the k GPUs of one node
    rings = 2 * m * (world - 1) / world * loads.row_wise
    node = 2 * m * (k - 1) / k * loads.node_rs
    params = ctx.spec.dense_params() + loads.dp_params
    dense = 2 * (world - 1) / world * params * GRAD_BYTES
    # pairwise all-to-all: (k-1)/n of each member's bytes stay in the node (Thakur et al. 2005); a ring over N
    # nodes crosses each node boundary once per channel, the node's k rails sharing it, and (k-1)/k of its hops
    # stay inside (NCCL rings, as network.all_reduce)
    out = (world - k) / world
    inside = (k - 1) / k if world > k else 1.0
    # n-1 rounds per all-to-all and per ring reduce-scatter / all-gather (Thakur et al. 2005), forward and backward
    rounds = 2 * m * (world - 1) * ((a2a > 0) + (loads.row_wise > 0))
    node_rounds = 2 * m * (k - 1) * (loads.node_rs > 0)
    if world <= k:                    # one node: every round is an NVLink round
        rounds, node_rounds = 0, rounds + node_rounds
    b, spec = ctx.strategy.micro_batch, ctx.spec
    bottom = 3 * m * b * 2.0 * sum(x * y for x, y in zip(spec.bottom_widths(), spec.bottom_widths()[1:]))
    # forward reads the rows and writes the pooled vectors; the fused backward reads and writes both, twice the
    # forward's traffic (FBGEMM split_embedding_backward, as step_times)
    cold = tuple(3 * m * (r - h + w) for r, h, w in zip(loads.lookup_b, loads.hot_b, loads.write_b))
    hot = tuple(3 * m * h for h in loads.hot_b)
    return SymbolicCost(lookup_bytes=3 * m * max(loads.lookup_b), a2a_intra=a2a * (k - 1) / world,
                        a2a_inter=a2a * out, ring_intra=rings * inside,
                        ring_inter=rings / k if world > k else 0.0, reduce_intra=dense * inside,
                        reduce_inter=dense / k if world > k else 0.0, bottom_flops=bottom,
                        mlp_flops=3 * m * b * spec.forward_flops_per_sample(), rounds=rounds,
                        node_rounds=node_rounds, node_ring=node, lookup_cold=cold, lookup_hot=hot,
                        optimizer_bytes=compute.optimizer_bytes(params, params))
