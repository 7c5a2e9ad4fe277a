"""Collective and point-to-point times for a group placed on the cluster's network tiers.

Pure arithmetic on the group's shape (how many members share a node, how many nodes it spans);
the networkx graph in ``topology.py`` shows which links a group crosses and checks these shapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from autoplan.specs.cluster import ClusterSpec, NetworkTier
from autoplan.specs.plan import RANK_ORDER, Plan


@dataclass(frozen=True, slots=True)
class GroupShape:
    """Where one communication group's members sit."""

    size: int
    """Members (n)."""
    per_node: int
    """Members on one node (k)."""
    nodes: int
    """Nodes the group spans (N = n / k)."""
    span: int
    """Consecutive GPU ranks from the first member to the last."""


def stride(s: Plan, kind: str) -> int:
    """Rank distance between neighbours of a ``kind`` group in Megatron's order (tp, cp, dp, pp)."""
    sizes = {"tp": s.tp, "cp": s.cp, "dp": s.dp, "pp": s.pp}
    out = 1
    for axis in RANK_ORDER:
        if axis == kind:
            return out
        out *= sizes[axis]
    raise ValueError(f"unknown group kind {kind!r}")


def group_shape(gpus_per_node: int, size: int, step: int) -> GroupShape:
    """Shape of a group of ``size`` ranks ``step`` apart on nodes of ``gpus_per_node`` GPUs."""
    # Megatron-LM parallel_state: ranks numbered node by node, a group's members ``step`` ranks apart
    per_node = max(1, min(size, gpus_per_node // step)) if step < gpus_per_node else 1
    return GroupShape(size=size, per_node=per_node, nodes=math.ceil(size / per_node), span=step * (size - 1) + 1)


def shape_of(cluster: ClusterSpec, s: Plan, kind: str) -> GroupShape:
    """Shape of the ``kind`` group (tp, cp, dp or pp) of plan ``s`` on ``cluster``."""
    size = {"tp": s.tp, "cp": s.cp, "dp": s.dp, "pp": s.pp}[kind]
    return group_shape(cluster.domain_gpus, size, stride(s, kind))


def _inter_tier(cluster: ClusterSpec, g: GroupShape) -> NetworkTier:
    return cluster.tier_spanning(g.span) if len(cluster.tiers) > 1 else cluster.tiers[0]


def _rate(t: NetworkTier, nbytes: float = 0.0) -> float:
    # NCCL reaches its bus bandwidth only for large messages: B·S/(S + S½) (nccl-tests size sweeps)
    ramp = nbytes / (nbytes + t.half_bandwidth_bytes) if nbytes > 0 and t.half_bandwidth_bytes else 1.0
    return t.bandwidth * t.efficiency * ramp


@lru_cache(maxsize=65536)
def all_reduce(cluster: ClusterSpec, g: GroupShape, nbytes: float) -> float:
    """Seconds for an all-reduce of ``nbytes`` per member.

    Bandwidth: 2(n-1)/n·S over the bottleneck tier's bus bandwidth (Patarasuk & Yuan 2009; nccl-tests busbw).
    Latency: the smaller of the ring's 2(n-1) steps and NCCL's tree, 2(k-1) NVLink steps plus a double binary
    tree of 2·log2(N) steps across nodes (NCCL 2.4 trees).
    """
    n = g.size
    if n <= 1 or nbytes <= 0:
        return 0.0
    nvl = cluster.tiers[0]
    if g.nodes == 1:
        ring = 2 * (n - 1) / n * nbytes / _rate(nvl, nbytes) + all_reduce_latency(cluster, g)
        return min(ring, _in_switch_all_reduce(nvl, n, nbytes)) if nvl.allreduce_busbw else ring
    outer = _inter_tier(cluster, g)
    return _ring(nvl, outer, g, 2 * (n - 1) / n * nbytes, 0, nbytes) + all_reduce_latency(cluster, g)


def all_reduce_latency(cluster: ClusterSpec, g: GroupShape) -> float:
    """Seconds of an all-reduce's steps alone, what a buffer of a few bytes costs: the ring's 2(n-1) steps inside
    one node; across nodes the smaller of the ring's and NCCL's tree, 2(k-1) NVLink steps plus a double binary tree
    of 2·log2(N) steps (NCCL 2.4 trees)."""
    n = g.size
    if n <= 1:
        return 0.0
    nvl = cluster.tiers[0]
    if g.nodes == 1:
        return 2 * (n - 1) * nvl.latency
    outer = _inter_tier(cluster, g)
    tree = 2 * (g.per_node - 1) * nvl.latency + 2 * math.ceil(math.log2(g.nodes)) * outer.latency
    return min(2 * (n - 1) * outer.latency, tree)


def _in_switch_all_reduce(nvl: NetworkTier, n: int, nbytes: float) -> float:
    """Seconds of an NVLink SHARP (NVLS) all-reduce of ``nbytes`` over ``n`` GPUs of one NVSwitch domain."""
    # the switch reduces and multicasts, so each GPU sends and receives its buffer about once whatever n is: the
    # busbw measured over the whole domain (its ``gpus``) is an algorithm bandwidth busbw·ref/(2(ref−1)) (nccl-tests
    # doc/PERFORMANCE.md: busbw = algbw·2(n−1)/n), not a bus bandwidth that scales with n; NCCL takes the faster of
    # NVLS and its ring (NCCL tuning picks the algorithm by predicted time)
    ref = nvl.gpus if nvl.gpus > 1 else n
    ramp = _rate(nvl, nbytes) / _rate(nvl)
    return 2 * (ref - 1) / ref * nbytes / (nvl.allreduce_busbw * ramp) + 2 * (n - 1) * nvl.latency


def _ring(nvl: NetworkTier, outer: NetworkTier, g: GroupShape, traffic: float, steps: int, nbytes: float) -> float:
    # a ring over N nodes of k members crosses each node boundary once per channel: the node's k rails share it
    # (NCCL's rings, one per NIC on rail-optimized nodes: NVIDIA DGX SuperPOD reference architecture)
    busbw = g.per_node * _rate(outer, nbytes)
    if g.per_node > 1:
        busbw = min(busbw, _rate(nvl, nbytes) * g.per_node / (g.per_node - 1))
    return traffic / busbw + steps * outer.latency


@lru_cache(maxsize=65536)
def reduce_scatter(cluster: ClusterSpec, g: GroupShape, nbytes: float) -> float:
    """Seconds for a ring reduce-scatter of an ``nbytes`` buffer: (n-1)/n·S over the bottleneck tier."""
    # ring reduce-scatter: n−1 steps of S/n each (Thakur et al. 2005, IJHPCA 19(1); nccl-tests busbw)
    n = g.size
    if n <= 1 or nbytes <= 0:
        return 0.0
    nvl = cluster.tiers[0]
    if g.nodes == 1:
        return (n - 1) / n * nbytes / _rate(nvl, nbytes) + (n - 1) * nvl.latency
    return _ring(nvl, _inter_tier(cluster, g), g, (n - 1) / n * nbytes, n - 1, nbytes)


def all_gather(cluster: ClusterSpec, g: GroupShape, nbytes: float) -> float:
    """Seconds for a ring all-gather producing an ``nbytes`` buffer (the mirror of reduce-scatter)."""
    # the same n−1 steps of S/n as reduce-scatter, without the reduction (Thakur et al. 2005)
    return reduce_scatter(cluster, g, nbytes)


@lru_cache(maxsize=4096)
def all_to_all(cluster: ClusterSpec, g: GroupShape, nbytes: float) -> float:
    """Seconds for an all-to-all where each member holds ``nbytes``: (k-1)/n of it stays in the node."""
    n = g.size
    if n <= 1 or nbytes <= 0:
        return 0.0
    nvl = cluster.tiers[0]
    # pairwise exchange (Thakur et al. 2005): S/n to each peer, (k−1)/n over NVLink and the rest across nodes
    intra = (g.per_node - 1) / n * nbytes / _rate(nvl, nbytes)
    if g.nodes == 1:
        return intra + (n - 1) * nvl.latency
    outer = _inter_tier(cluster, g)
    inter = (n - g.per_node) / n * nbytes / _rate(outer, nbytes)
    return max(intra, inter) + (n - 1) * outer.latency


def two_hop_all_to_all(cluster: ClusterSpec, g: GroupShape, inter_bytes: float, intra_bytes: float) -> float:
    """Seconds for an all-to-all that sends ``inter_bytes`` per GPU across nodes, each to the peer of the same
    local index in the target node, and ``intra_bytes`` per GPU over NVLink (the in-node share and the forwarding
    of what arrived), both at once: DeepSeek-V3's node-limited dispatch (arXiv 2412.19437 §3.2.2, DeepEP)."""
    if g.size <= 1 or inter_bytes + intra_bytes <= 0:
        return 0.0
    nvl = cluster.tiers[0]
    intra = intra_bytes / _rate(nvl, intra_bytes) if intra_bytes > 0 else 0.0
    if g.nodes == 1:
        return intra + (g.per_node - 1) * nvl.latency
    outer = _inter_tier(cluster, g)
    inter = inter_bytes / _rate(outer, inter_bytes) if inter_bytes > 0 else 0.0
    # IB and NVLink transfers pipeline in DeepSeek's kernels (§3.2.2): the slower one sets the time; one message
    # per remote node's peer, one per GPU of the node (Hockney's α per message)
    return max(intra, inter) + (g.nodes - 1) * outer.latency + (g.per_node - 1) * nvl.latency


@lru_cache(maxsize=4096)
def send_recv(cluster: ClusterSpec, same_node: bool, nbytes: float) -> float:
    """Seconds to send ``nbytes`` to one peer: NVLink inside a node, the GPU's own NIC across nodes."""
    if nbytes <= 0:
        return 0.0
    tier = cluster.tiers[0] if same_node or len(cluster.tiers) == 1 else cluster.tiers[-1]
    # Hockney's α-β model (Hockney 1994, Parallel Computing 20(3)): latency plus bytes over bandwidth
    return nbytes / _rate(tier, nbytes) + tier.latency


COLLECTIVES = {"all_reduce": all_reduce, "reduce_scatter": reduce_scatter, "all_gather": all_gather}
"""Collective time functions by name (the kinds layers and DP buckets ask for)."""


def bus_bandwidth(op: str, n: int, nbytes: float, seconds: float) -> float:
    """nccl-tests bus bandwidth (B/s) of a collective: algorithm bandwidth × its per-rank traffic factor."""
    # nccl-tests doc/PERFORMANCE.md: busbw = algbw · 2(n−1)/n for all-reduce, (n−1)/n for the others
    factor = {"all_reduce": 2 * (n - 1) / n, "reduce_scatter": (n - 1) / n, "all_gather": (n - 1) / n,
              "all_to_all": (n - 1) / n}[op]
    return nbytes / seconds * factor
