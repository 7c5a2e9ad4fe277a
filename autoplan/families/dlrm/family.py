"""Deep learning recommendation models (DLRM, DCN-v2) trained the TorchRec way: MLPs data-parallel on every GPU,
embedding tables sharded table-, row-, column-, table-row-wise or replicated, pooled embeddings exchanged by
all-to-all (Naumov et al. 2019, arXiv 1906.00091; Lin et al. 2022, arXiv 2201.07821).

The per-table sharding is the family's own plan part: ``Plan.sharding`` says ``auto`` (the planner in
``families/dlrm/sharding_search.py`` picks each table's kind and GPUs) or one kind for every table; ``sharding_plan``
gives the tables' plan of any Plan, for reports and export.
"""

from __future__ import annotations


from autoplan.hardware import network, policy
from autoplan.hardware.compute import Op, gemm_time
from autoplan.families.costs import CommNeed, StepCosts, pass_cost
from autoplan.families.base import family_of_functions
from autoplan.families.costs import StageMemory
from autoplan.families.dlrm.sharding import DENSE_STATE_BYTES, GRAD_BYTES, context, symbolic_cost
from autoplan.families.dlrm.sharding_search import ShardingPlan
from autoplan.families.dlrm.sharding_search import sharding_plan as _plan
from autoplan.specs.cluster import ClusterSpec
from autoplan.families.dlrm.spec import dlrm_of
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

_ONE = ("tp", "pp", "cp", "spatial", "channel", "filter", "ep", "etp")
"""Parallel degrees of other families that a DLRM plan leaves at 1."""
_DEFAULT_ONLY = ("precision", "fp8_param_gather", "tp_comm_overlap", "cp_comm", "ep_overlap", "moe_dispatcher",
                 "deepseek_fp8", "optimizer_moments", "fp8_activation_store")
"""Other families' knobs a DLRM plan leaves at their defaults (not modelled here)."""
ACTIVATION_BYTES = 4
"""Bytes per saved activation value (fp32 MLPs, as the MLPerf reference)."""


def _activations(model: ModelSpec, s: Plan) -> float:
    """Bytes of one micro-batch's saved activations: every MLP layer's input and output, the interaction's inputs."""
    spec = model.structure
    widths = sum(spec.bottom_widths()) + sum(spec.top_widths())
    inputs = sum(t.dim for t in spec.tables) + spec.bottom_mlp[-1]
    # activations kept for the backward, one value per layer output and input (Korthikanti et al. 2022 §4 logic)
    return ACTIVATION_BYTES * s.micro_batch * (widths + inputs + spec.interaction_width)


def _fixed_bytes(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    return model.structure.dense_params() * DENSE_STATE_BYTES + _activations(model, s) + cluster.gpu.memory_reserve_bytes


def embedding_room(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """Bytes per GPU the dense part (MLP states, activations, reserve) leaves for embedding shards."""
    return cluster.gpu.hbm_bytes - _fixed_bytes(model, cluster, s)


def sharding_plan(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> ShardingPlan:
    """Every table's sharding and GPUs under plan ``s``, in the memory the dense part leaves."""
    return _plan(model, cluster, s, embedding_room(model, cluster, s))


def violations(model: ModelSpec, gpus: int, s: Plan) -> list[str]:
    """Every reason ``s`` cannot train DLRM ``model`` on ``gpus`` GPUs."""
    if dlrm_of(model) is None:
        return [f"model {model.name!r} has family dlrm but no DLRM structure (tables and MLPs, families/dlrm/spec.py)"]
    out = []
    if s.gpus != gpus or s.dp != gpus:
        out.append(f"a DLRM trains its MLPs data-parallel on every GPU: dp must be the {gpus} GPUs "
                   f"(dp·tp·pp·cp = {s.dp}·{s.tp}·{s.pp}·{s.cp})")
    out += [f"{k} must be 1 for a DLRM, got {getattr(s, k)}" for k in _ONE if getattr(s, k, 1) != 1]
    defaults = type(s).defaults()
    out += [f"{k} {getattr(s, k)!r} is not modelled for a DLRM (use {defaults[k]!r})" for k in _DEFAULT_ONLY
            if k in defaults and getattr(s, k) != defaults[k]]
    if s.global_batch % (s.dp * s.micro_batch):
        out.append(f"global batch {s.global_batch} is not divisible by dp·micro_batch = {s.dp}·{s.micro_batch}")
    if s.schedule != "1f1b" or s.virtual_stages != 1:
        out.append("a DLRM has no pipeline: schedule must be 1f1b with one virtual stage")
    if s.sequence_parallel:
        out.append("sequence parallelism needs tp > 1")
    if s.recompute != "none":
        out.append(f"recompute {s.recompute} is not modelled for a DLRM (use none)")
    if s.zero:
        out.append(f"ZeRO stage {s.zero} is not modelled for a DLRM (TorchRec shards the tables itself; use 0)")
    if s.uneven:
        out.append("uneven pipeline stages need pp > 1")
    return out


def step_costs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> StepCosts:
    """One representative GPU (the busiest): every micro-batch's forward and backward, the dense all-reduce and
    the optimizer step."""
    t = sharding_plan(model, cluster, s).times
    fwd = pass_cost(("compute", t.fwd_compute), ("a2a", t.fwd_a2a))
    bwd = pass_cost(("compute", t.bwd_compute), ("a2a", t.bwd_a2a))
    passes = {(f, a, b): fwd if f else bwd for f in (True, False) for a in (False, True) for b in (False, True)}
    return StepCosts(passes=passes, optimizer=(t.optimizer,), hop=0.0, segments=0, segment_reduce=None,
                     param_gather=None, shard_gather=0.0, shard_reduce=0.0,
                     reduce_all=(t.reduce,) if s.dp > 1 else None, final_gather=None, tied=None)


def lower_bound(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """The compute stream's busy time: every pass and the optimizer (a stream's work bounds the step, Graham 1969)."""
    t = sharding_plan(model, cluster, s).times
    return t.micro_batches * (t.fwd_compute + t.fwd_a2a + t.bwd_compute + t.bwd_a2a) + t.optimizer


def memory(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[StageMemory]:
    """Bytes on the fullest GPU: its embedding shards (tables that fit nowhere count in full), the dense part."""
    plan = sharding_plan(model, cluster, s)
    spec = model.structure
    lost = sum(t.params * spec.embedding_bytes for t in spec.tables if t.name in plan.unplaced)
    dense = spec.dense_params()
    loads = plan.loads
    return [StageMemory(stage=0, weights=dense * 4.0, gradients=dense * 4.0, optimizer=dense * 4.0,
                        activations=_activations(model, s), embedding=max(loads.memory) + lost,
                        buffers=2 * (max(loads.send) + max(loads.recv)), reserve=cluster.gpu.memory_reserve_bytes)]


def peak_memory(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """The fullest GPU's bytes."""
    return memory(model, cluster, s)[0].total


def collectives(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[CommNeed]:
    """The all-to-all of pooled embeddings, row-wise reduce-scatters and the dense gradient all-reduce."""
    loads = sharding_plan(model, cluster, s).loads
    everyone = network.group_shape(cluster.domain_gpus, s.dp, 1)
    a2a = max(max(loads.send), max(loads.recv))
    out = []
    if s.dp > 1 and a2a > 0:
        out.append(CommNeed(group="dp", op="all_to_all", shape=everyone, nbytes=a2a,
                            seconds=policy.all_to_all(cluster, everyone, a2a, s.collective_policy),
                            when="2× per micro-batch (pooled embeddings forward, their gradients backward)"))
    if s.dp > 1 and loads.row_wise > 0:
        out.append(CommNeed(group="dp", op="reduce_scatter", shape=everyone, nbytes=loads.row_wise,
                            seconds=policy.reduce_scatter(cluster, everyone, loads.row_wise, s.collective_policy),
                            when="per micro-batch (row-wise tables' partial sums; all-gather backward)"))
    dense = (model.structure.dense_params() + loads.dp_params) * GRAD_BYTES
    if s.dp > 1:
        out.append(CommNeed(group="dp", op="all_reduce", shape=everyone, nbytes=dense,
                            seconds=policy.all_reduce(cluster, everyone, dense, s.collective_policy),
                            when="per step (MLP and data-parallel tables' gradients)"))
    return out


def block_ops(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> dict[str, tuple[Op, ...]]:
    """Kernels of one micro-batch on the busiest GPU: the fused lookup, the MLP layers, the interaction."""
    spec, b, gpu = model.structure, s.micro_batch, cluster.gpu
    loads = sharding_plan(model, cluster, s).loads
    ctx = context(model, cluster, s)
    look = Op("embedding_lookup", 0.0, max(loads.lookup_b), max(loads.lookup_s))
    fwd, bwd = [look], [Op("embedding_update", 0.0, 2 * look.bytes, 2 * look.seconds)]
    # a rank-0 bottom MLP runs on GPU 0 over every GPU's samples (NVIDIA DLRM DistributedDlrm)
    rows = {"bottom": b * s.dp if spec.bottom_mlp_placement == "rank0" else b, "top": b}
    for part, widths in (("bottom", spec.bottom_widths()), ("top", spec.top_widths())):
        b = rows[part]
        for i, (k, n) in enumerate(zip(widths, widths[1:])):
            flops = 2.0 * b * k * n
            fwd.append(Op(f"{part}_mlp.{i}", flops, 0.0, gemm_time(gpu, b, n, k)))
            bwd.append(Op(f"{part}_mlp.{i}.bwd", 2 * flops, 0.0, gemm_time(gpu, b, k, n) + gemm_time(gpu, k, n, b)))
    inter = spec.interaction_flops() * rows["top"]
    fwd.append(Op("interaction", inter, 0.0, ctx.dense_fwd[1]))
    bwd.append(Op("interaction.bwd", 2 * inter, 0.0, ctx.dense_bwd[1]))
    return {"forward": tuple(fwd), "backward": tuple(bwd), "recompute": ()}


HBM_FREE = 1e30
"""An HBM rate at which the lookups cost nothing (``shape`` weights keep only the network's shape)."""


def symbolic(model: ModelSpec, cluster: ClusterSpec, unit: ClusterSpec, s: Plan, weights: str = "shape") -> float:
    """FLOP-equivalents of plan ``s`` by its DLRM counts (``sharding.SymbolicCost``), the tables placed as on ``unit``
    (the weights' unit cluster, as every family's symbolic score sees the plan): the busiest GPU's lookups, each
    pass's collectives beside its bottom MLP, the other MLPs, the step-end reduction and optimizer. ``shape``: a
    byte through a network tier weighs a FLOP, HBM bytes nothing; ``balance``: ``cluster``'s datasheet rates
    (HBM, NVLink, the tier the GPUs span, peak FLOP/s) times peak FLOP/s; ``launch``: balance plus each collective
    round's latency (the tiers' calibrated per-step latency)."""
    counts = symbolic_cost(context(model, unit, s), sharding_plan(model, unit, s).loads)
    if weights == "shape":
        # as families/symbolic.py's unit cluster: a FLOP weighs a byte through a network tier, HBM traffic is free
        return counts.seconds(HBM_FREE, 1.0, 1.0, 1.0)
    gpu, nvlink, outer = cluster.gpu, cluster.tiers[0], cluster.tier_spanning(s.dp)
    # the roofline's machine balance (Williams et al. 2009), as families/symbolic.py: seconds at peak rates × peak FLOP/s
    latency = (outer.latency, nvlink.latency) if weights == "launch" else (0.0, 0.0)
    return gpu.peak_flops * counts.seconds(gpu.hbm_bandwidth, nvlink.bandwidth, outer.bandwidth, gpu.peak_flops,
                                           *latency)


DLRM = family_of_functions(globals(), "dlrm", ("dp",), default_space="dlrm")
"""The DLRM family: costs from ``families/dlrm/sharding.py`` and ``families/dlrm/embedding.py`` under the planner's sharding."""

FAMILIES = (DLRM,)
"""The families this package registers."""
