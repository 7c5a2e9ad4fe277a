"""Symbolic, hardware-free ranking of plans (SMSG-style): count what a plan computes and communicates, not how
fast a GPU or a link does it.

A plan's cost is a closed form over volumes its model family already knows how to count:

    score = (1 + bubble) · max_stage Σ_passes (F + Σ_k w_k · B_k)  +  exposed DP/PP/tied bytes (weighted)

F is the floating-point work of a chunk pass on one GPU, B_k the bytes one GPU moves through network tier k in
that pass, ``bubble`` the pipeline's idle fraction (p−1)/(v·m) (Narayanan et al. SC'21 §2.2.1), and w_k a
dimensionless weight per tier. The volumes come from the family's own ``step_costs`` evaluated on a *unit
cluster*: the same GPUs per node, tiers and tier sizes, but every rate set to one (1 FLOP/s, 1 B/s per tier,
efficiencies 1), no latencies, kernel overheads, wave quantization or message-size ramps, and memory-bound
kernels free. A second on the unit cluster is then one FLOP, or one byte over a tier; so this works for every
registered family (``autoplan.families.registry``) without new per-family code, and needs no event simulation. A
family with counts of its own (``Family.symbolic``: the DLRM's sharding counts) scores its plans by those instead.

What it may know of the hardware (the issue's "nothing beyond the topology shape"):

* ``shape`` weights (these functions' default): w_k = 1 for every tier. Only the topology's shape is kept: GPUs
  per node, the tiers and how many GPUs each joins (which decides which tier a group's traffic crosses and how a
  node's rails share it). A FLOP and a byte weigh the same.
* ``balance`` weights: w_k = peak FLOP/s ÷ tier bandwidth (B/s), both datasheet numbers (the roofline's
  machine balance, Williams et al. 2009): one dimensionless ratio per tier, no efficiency, latency or other
  calibration constant. It is a hardware constant; ``autoplan search --cost symbolic`` uses it by default, as
  the strict mode ranks poorly (Kendall τ 0.05–0.55 against the simulator, balance 0.34–0.84:
  ``benchmarks/bench_symbolic.py``).

* ``launch`` weights (opt-in; no longer hardware-free): ``balance`` plus every kernel launch weighted by the FLOPs
  the GPU could have done meanwhile (the cluster spec's calibrated ``kernel_overhead_us`` × peak FLOP/s). Launches
  are a count the family's ``step_costs`` already make (one per GEMM or memory-bound kernel), so this is still a
  closed form, but the weight is a calibration constant. Where passes are small (a CNN's per-GPU batch of a few
  samples) launches decide the simulated ranking: τ rises from 0.34 to 0.90 on the CNN case, 0.73 to 0.84 on
  gpt-1.7b, 0.60 to 0.98 on DLRM, whose family scores its own counts (``benchmarks/bench_symbolic.py``).

HBM capacity is used only as the feasibility constraint (a plan that does not fit is no plan), through the
family's ``peak_memory`` on the real cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from autoplan.families.costs import StepCosts
from autoplan.families.registry import family_of
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.layout import ends, model_copies, virtual_stage
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy

FREE = 1e30
"""A rate so high that what it prices costs nothing (memory-bound kernels on the unit cluster)."""
WEIGHTS = ("shape", "balance", "launch")
"""How network tiers are weighed against FLOPs (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class SymbolicScore:
    """A plan's symbolic cost and its parts (FLOPs and bytes per GPU per step)."""

    score: float
    """The ranking key: FLOP-equivalents on the critical path of one step (lower is better)."""
    busy: float
    """Weighted work of the busiest stage's compute stream (FLOPs + w·exposed bytes) over all micro-batches."""
    bubble: float
    """Pipeline idle fraction (p−1)/(v·m)."""
    exposed: float
    """Weighted bytes of transfers outside the passes: pipeline fill and drain, unhidden DP and tied reductions."""
    fits: bool
    """Peak memory within the GPU's capacity."""


def tier_weights(cluster: ClusterSpec, weights: str = "shape") -> tuple[float, ...]:
    """FLOP-equivalents of one byte through each tier, innermost first."""
    if weights == "shape":
        return tuple(1.0 for _ in cluster.tiers)
    if weights in ("balance", "launch"):
        # roofline machine balance (Williams et al. 2009, CACM 52(4)): peak FLOP/s over the tier's B/s
        return tuple(cluster.gpu.peak_flops / t.bandwidth for t in cluster.tiers)
    raise ValueError(f"symbolic weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")


@lru_cache(maxsize=256)
def weighted_cluster(cluster: ClusterSpec, flop_weight: float, byte_weights: tuple[float, ...],
                     launch_weight: float = 0.0) -> ClusterSpec:
    """``cluster`` where a second is ``flop_weight`` per FLOP plus ``byte_weights[k]`` per byte through tier k (a
    zero weight: free) plus ``launch_weight`` per kernel launch, with no efficiency, latency, wave quantization,
    ramp or host issue time; HBM traffic free."""
    rate = lambda w: 1.0 / w if w else FREE  # noqa: E731
    gpu = replace(cluster.gpu, peak_flops=rate(flop_weight), clock_ratio=1.0, speed_variability=0.0,
                  gemm_efficiency=1.0, attention_efficiency=1.0, gemm_half_k=0.0, gemm_tile=(1, 1), sm_count=1,
                  kernel_overhead=launch_weight, host_launch=0.0,
                  hbm_bandwidth=FREE, memory_efficiency=1.0, attention_memory_efficiency=1.0)
    tiers = tuple(replace(t, bandwidth=rate(w), efficiency=1.0, latency=0.0, allreduce_busbw=0.0,
                          half_bandwidth_bytes=0.0) for t, w in zip(cluster.tiers, byte_weights))
    return replace(cluster, gpu=gpu, tiers=tiers)


def launch_weight(cluster: ClusterSpec, weights: str = "shape") -> float:
    """FLOP-equivalents of one kernel launch: 0 unless ``launch`` weights, then the launch overhead × peak FLOP/s."""
    # a launch occupies the GPU for kernel_overhead seconds, in which it could have done peak·overhead FLOPs
    return cluster.gpu.kernel_overhead * cluster.gpu.peak_flops if weights == "launch" else 0.0


def unit_cluster(cluster: ClusterSpec, weights: str = "shape") -> ClusterSpec:
    """``cluster`` with every rate 1 (a byte through tier k costs w_k, a launch its ``launch_weight``): seconds there
    are FLOPs, bytes and launches."""
    return weighted_cluster(cluster, 1.0, tier_weights(cluster, weights), launch_weight(cluster, weights))


def bubble_fraction(s: Strategy) -> float:
    """Idle fraction of a pipeline flush schedule: (p−1)/(v·m) (Narayanan et al. SC'21 §2.2.1-2.2.2)."""
    return (s.pp - 1) / (s.chunks * s.micro_batches)


def _stage_busy(costs: StepCosts, s: Strategy, stage: int) -> float:
    """Weighted work of ``stage``'s compute stream: its chunks' forward and backward passes, every micro-batch."""
    per_micro = 0.0
    for c in range(s.chunks):
        at_ends = ends(s.schedule, virtual_stage(s.schedule, stage, c, s.pp), s.pp, s.chunks)
        per_micro += costs.passes[(True, *at_ends)].seconds + costs.passes[(False, *at_ends)].seconds
    # ZeRO-3 gathers weights before every pass (ZeRO §5.3), on the DP stream beside the passes: the stage is busy
    # for the longer of the two (two overlapped streams). ZeRO-2/3's reduce-scatter after every backward (§5.2)
    # hides under the passes that follow it, as the bucketed reductions of ZeRO 0/1 do; only the last is exposed
    # (``_exposed``). Weighed against the passes' FLOPs at peak it would rank ZeRO-2 with pp > 1 behind plans
    # the simulator finds slower (GPT-3 on 1024 H100s: the simulator's best 339th; a GEMM runs at about half of
    # peak, a reduce-scatter near its bandwidth)
    sharded = s.micro_batches * s.chunks * 2 * costs.shard_gather
    # DualPipe: each direction's chunk runs half the micro-batches
    return max(s.micro_batches / model_copies(s.schedule) * per_micro, sharded) + costs.optimizer[stage]


def _exposed(costs: StepCosts, s: Strategy, stage: int) -> float:
    """Transfers the schedule cannot hide behind compute."""
    # pipeline fill and drain: p−1 hops forward and p−1 back (Narayanan et al. SC'21 §4.1)
    out = 2 * (s.pp - 1) * costs.hop
    if costs.segments and costs.segment_reduce:
        out += costs.segment_reduce       # the last bucket's reduction ends after the last backward (Li et al. 2020)
    if costs.reduce_all:
        out += costs.reduce_all[stage]
    if costs.final_gather:
        out += costs.final_gather[stage]
    # the first pass waits for its ZeRO-3 gather, the last backward's ZeRO-2/3 reduce-scatter ends the step
    out += costs.shard_gather + costs.shard_reduce
    return out + (costs.tied or 0.0)


def _stages(s: Strategy) -> tuple[int, ...]:
    """Stages that can be the busiest: the two ends and one middle stage (all middle stages are alike)."""
    return tuple(sorted({0, s.pp - 1, min(1, s.pp - 1)}))


def symbolic_score(model: ModelSpec, cluster: ClusterSpec, s: Strategy, weights: str = "shape") -> SymbolicScore:
    """The symbolic cost of valid plan ``s`` and its parts (see the module docstring)."""
    family = family_of(model)
    fits = family.peak_memory(model, cluster, s) <= cluster.gpu.hbm_bytes
    own = getattr(family, "symbolic", None)
    if own is not None:
        # a family with counts of its own (DLRM: its tables' placement); one stage, nothing outside its passes
        score = own(model, cluster, unit_cluster(cluster, weights), s, weights)
        return SymbolicScore(score=score, busy=score, bubble=0.0, exposed=0.0, fits=fits)
    costs = family.step_costs(model, unit_cluster(cluster, weights), s)
    bubble = bubble_fraction(s)
    # the step ends when the slowest stage does: its busy time stretched by the bubble, plus what it cannot hide
    total, busy, exposed = max((b * (1 + bubble) + x, b, x)
                               for b, x in ((_stage_busy(costs, s, i), _exposed(costs, s, i)) for i in _stages(s)))
    return SymbolicScore(score=total, busy=busy, bubble=bubble, exposed=exposed, fits=fits)


def symbolic_cost(model: ModelSpec, cluster: ClusterSpec, s: Strategy, weights: str = "shape") -> float:
    """``symbolic_score(...).score`` without the memory check (for plans already known to fit)."""
    own = getattr(family_of(model), "symbolic", None)
    if own is not None:
        return own(model, cluster, unit_cluster(cluster, weights), s, weights)
    return _critical(model, unit_cluster(cluster, weights), s)


def _critical(model: ModelSpec, unit: ClusterSpec, s: Strategy, bubble: bool = True) -> float:
    """The slowest stage's busy time (stretched by the bubble unless ``bubble`` is False) plus its exposed time."""
    costs = family_of(model).step_costs(model, unit, s)
    stretch = 1 + bubble_fraction(s) if bubble else 1.0
    return max(_stage_busy(costs, s, i) * stretch + _exposed(costs, s, i) for i in _stages(s))


@dataclass(frozen=True, slots=True)
class SymbolicVolumes:
    """What the slowest stage of a plan computes and moves in one step, per GPU, each on its own."""

    flops: float
    """FLOPs of the busiest stage's passes over all micro-batches (recompute included; bubble not)."""
    tier_bytes: tuple[tuple[str, float], ...]
    """(tier name, bytes through that tier on the critical path), innermost first; bubble not included."""
    bubble: float


def symbolic_volumes(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> SymbolicVolumes:
    """The FLOPs and the bytes per tier behind ``symbolic_score``, each probed alone (the others made free)."""
    n = len(cluster.tiers)
    flops = _critical(model, weighted_cluster(cluster, 1.0, (0.0,) * n), s, bubble=False)
    tiers = tuple((t.name, _critical(model, weighted_cluster(cluster, 0.0, tuple(float(i == k) for i in range(n))),
                                     s, bubble=False)) for k, t in enumerate(cluster.tiers))
    return SymbolicVolumes(flops=flops, tier_bytes=tiers, bubble=bubble_fraction(s))
