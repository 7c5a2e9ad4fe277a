"""N-dimensional networks: a GPU group as a product of dimensions, each with its own topology, bandwidth and latency.

The view of Rashidi et al., "Themis" (ISCA 2022, arXiv 2110.04478): a collective on a multi-dimensional
network runs as one phase per dimension (e.g. NVLink domain × leaf × spine, or the axes of a torus).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoplan.hardware.network import GroupShape
from autoplan.errors import SpecError
from autoplan.specs.cluster import DIMENSION_TOPOLOGIES as TOPOLOGIES, ClusterSpec, NetworkTier


@dataclass(frozen=True, kw_only=True)
class NetworkDim:
    """One network dimension: ``size`` GPUs joined by a ring, a switch or all-to-all links."""

    size: int
    """GPUs along this dimension (≥ 2)."""
    topology: str
    """``ring``, ``switch`` or ``fully_connected``: sets the number of algorithm steps of a phase."""
    bandwidth: float
    """Bytes/s per GPU per direction in this dimension."""
    latency: float
    """Seconds per algorithm step in this dimension."""
    name: str = ""

    def __post_init__(self) -> None:
        label = self.name or "a network dimension"
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 2:
            raise SpecError(f"size of {label} must be an integer ≥ 2, got {self.size!r}")
        if self.topology not in TOPOLOGIES:
            raise SpecError(f"topology of {label} must be one of {', '.join(TOPOLOGIES)}, got {self.topology!r}")
        if not _finite(self.bandwidth) or self.bandwidth <= 0:
            raise SpecError(f"bandwidth of {label} must be a positive number of bytes/s, got {self.bandwidth!r}")
        if not _finite(self.latency) or self.latency < 0:
            raise SpecError(f"latency of {label} must be a number of seconds ≥ 0, got {self.latency!r}")

    @property
    def steps(self) -> int:
        """Algorithm steps of one reduce-scatter or all-gather phase along this dimension."""
        if self.topology == "ring":
            return self.size - 1  # ring: n-1 neighbour steps (Patarasuk & Yuan 2009)
        if self.topology == "switch":
            return math.ceil(math.log2(self.size))  # recursive halving/doubling (Thakur, Rabenseifner & Gropp 2005)
        return 1  # fully connected: one direct exchange with all n-1 peers (ASTRA-sim's "direct" algorithm)


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def make_dims(sizes: list[int], topologies: list[str], bandwidths_gb_per_s: list[float],
              latencies_us: list[float]) -> tuple[NetworkDim, ...]:
    """Dimensions from per-dimension lists (innermost first), in GB/s and µs as in the papers' tables."""
    n = len(sizes)
    if n == 0 or not (len(topologies) == len(bandwidths_gb_per_s) == len(latencies_us) == n):
        raise SpecError(f"a network needs one or more dimensions with one size, topology, bandwidth and latency "
                        f"each; got {n} sizes, {len(topologies)} topologies, {len(bandwidths_gb_per_s)} "
                        f"bandwidths, {len(latencies_us)} latencies")
    for what, values in (("bandwidth", bandwidths_gb_per_s), ("latency", latencies_us)):
        bad = [v for v in values if not _finite(v)]
        if bad:
            raise SpecError(f"{what} values must be numbers, got {bad[0]!r}")
    return tuple(NetworkDim(size=s, topology=t, bandwidth=b * 1e9, latency=lat * 1e-6, name=f"dim {i + 1}")
                 for i, (s, t, b, lat) in enumerate(zip(sizes, topologies, bandwidths_gb_per_s, latencies_us)))


def dims_of(cluster: ClusterSpec, gpus: int | None = None) -> tuple[NetworkDim, ...]:
    """The dimensions a group of ``gpus`` consecutive GPUs (default: the whole cluster) spans, innermost first.

    Two at most: the first tier (the NVLink domain) and the scale-out network. Leaf and spine tiers share each
    GPU's one NIC, so they are one dimension (Themis's dimensions own separate links): its bandwidth is
    the slowest spanned tier's and its per-step latency the outermost spanned tier's. Bandwidth is the tier's
    achievable rate (line rate × efficiency); each dimension runs ring phases, as NCCL does on every tier (the
    model of autoplan/hardware/network.py). Dimensions of size 1 are left out.
    """
    total = cluster.gpus if gpus is None else gpus
    if not isinstance(total, int) or isinstance(total, bool) or total < 1:
        raise SpecError(f"--gpus must be a positive integer, got {total!r}")
    if total > cluster.gpus:
        raise SpecError(f"a group of {total} GPUs does not fit in {cluster.name} with {cluster.gpus} GPUs")
    if cluster.dimensions:
        dims = explicit_dims(cluster, 1, total)
        if math.prod(d.size for d in dims) != total:
            sizes = " x ".join(str(d.size or "rest") for d in cluster.dimensions)
            raise SpecError(f"a group of {total} consecutive GPUs does not tile {cluster.name}'s dimensions "
                            f"{sizes}; use a product of the innermost sizes (or a multiple of all but the last)")
        return dims
    inner_tier, outer = cluster.tiers[0], cluster.tiers[1:]
    domain = total if inner_tier.gpus == 0 or not outer else min(inner_tier.gpus, total)
    if total % domain:
        raise SpecError(f"a group of {total} GPUs is not a whole number of {inner_tier.name} domains of "
                        f"{domain} GPUs; use a multiple of {domain} or at most {domain}")
    dims = []
    if domain > 1:
        dims.append(NetworkDim(size=domain, topology="ring", bandwidth=_rate(inner_tier),
                               latency=inner_tier.latency, name=inner_tier.name))
    if total > domain:
        spanned = outer[:next((i + 1 for i, t in enumerate(outer) if t.gpus == 0 or t.gpus >= total),
                                len(outer))]
        dims.append(NetworkDim(size=total // domain, topology="ring", bandwidth=min(_rate(t) for t in spanned),
                               latency=spanned[-1].latency, name="+".join(t.name for t in spanned)))
    return tuple(dims)


def _rate(tier: NetworkTier) -> float:
    return tier.bandwidth * tier.efficiency


def dims_of_shape(cluster: ClusterSpec, g: GroupShape, nbytes: float = 0.0,
                  outer_topology: str = "ring") -> tuple[NetworkDim, ...]:
    """The dimensions of a placed group: its ``per_node`` members on one node (the first tier) × its ``nodes``
    nodes (the tier its span crosses), at the tiers' calibrated rates for an ``nbytes`` message.

    Unlike ``dims_of``, the members need not be consecutive GPUs (a DP group strided by tp·cp). The rates keep
    autoplan/hardware/network.py's NCCL message-size ramp B·S/(S + S½) (nccl-tests size sweeps), so the baseline
    schedule prices a collective as that model does, up to latency terms. ``outer_topology`` sets the steps of the
    nodes' dimension (``switch``: log2 steps, as NCCL's inter-node trees take for all-reduce).
    """
    if cluster.dimensions:
        return explicit_dims(cluster, (g.span - 1) // (g.size - 1) if g.size > 1 else 1, g.size)
    dims = []
    inner = cluster.tiers[0]
    if g.per_node > 1:
        dims.append(NetworkDim(size=g.per_node, topology="ring", bandwidth=_ramped(inner, nbytes),
                               latency=inner.latency, name=inner.name))
    if g.nodes > 1:
        outer = cluster.tier_spanning(g.span) if len(cluster.tiers) > 1 else inner
        dims.append(NetworkDim(size=g.nodes, topology=outer_topology, bandwidth=_ramped(outer, nbytes),
                               latency=outer.latency, name=outer.name))
    return tuple(dims)


def _ramped(tier: NetworkTier, nbytes: float) -> float:
    ramp = nbytes / (nbytes + tier.half_bandwidth_bytes) if nbytes > 0 and tier.half_bandwidth_bytes else 1.0
    return _rate(tier) * ramp


def explicit_dims(cluster: ClusterSpec, stride: int, size: int) -> tuple[NetworkDim, ...]:
    """The dimensions of the cluster's ``[[dimensions]]`` that a group of ``size`` ranks ``stride`` apart spans.

    Ranks are numbered innermost dimension fastest (mixed radix, as ASTRA-sim numbers NPUs over its dimensions),
    so the group's members vary along every dimension whose rank range [P, P·n) overlaps [stride, stride·size),
    P the product of the sizes inside it: that many members along it. Bandwidth: line rate × efficiency.
    """
    out, inside = [], 1
    for d in cluster.dimensions:
        n = d.size or max(2, -(-cluster.gpus // inside))  # size 0: the rest of the cluster
        lo, hi = max(inside, stride), min(inside * n, stride * size)
        members = -(-hi // lo) if hi > lo else 1
        if members >= 2:
            out.append(NetworkDim(size=members, topology=d.topology, bandwidth=d.bandwidth * d.efficiency,
                                  latency=d.latency, name=d.name))
        inside *= n
    return tuple(out)
