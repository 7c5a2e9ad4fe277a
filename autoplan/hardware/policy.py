"""The DP gradient and parameter collectives priced by a collective policy: today's NCCL model or a chunked,
multi-dimensional schedule (baseline ascending order or Themis), per Strategy.collective_policy.

``nccl`` is autoplan/hardware/network.py unchanged. ``baseline`` and ``themis`` run autoplan/hardware/themis.py over the
group's dimensions: the cluster's explicit ``[[dimensions]]`` the group spans, or else its members in one NVLink
domain × the domains it spans, at the tiers' calibrated rates, message-size ramp included, so that ``baseline``
stays close to ``nccl``. Groups inside one NVLink domain (and, with explicit dimensions, groups along a single
dimension) keep the NCCL model. DP, CP and TP collectives all take the plan's policy.
"""

from __future__ import annotations

from functools import lru_cache

from autoplan.hardware import network
from autoplan.hardware.dims import dims_of_shape
from autoplan.hardware.themis import collective
from autoplan.specs.cluster import ClusterSpec

CHUNKS = 64
"""Chunks per collective: autoplan's choice, the default of ``autoplan collective`` and bench_themis.py."""


def reduce_scatter(cluster: ClusterSpec, g: network.GroupShape, nbytes: float, policy: str) -> float:
    """Seconds for a reduce-scatter of an ``nbytes`` buffer over group ``g`` under ``policy``."""
    return _time(cluster, g, "reduce_scatter", float(nbytes), policy)


def all_reduce(cluster: ClusterSpec, g: network.GroupShape, nbytes: float, policy: str) -> float:
    """Seconds for an all-reduce of ``nbytes`` per member over group ``g`` under ``policy``."""
    return _time(cluster, g, "all_reduce", float(nbytes), policy)


def all_gather(cluster: ClusterSpec, g: network.GroupShape, nbytes: float, policy: str) -> float:
    """Seconds for an all-gather producing an ``nbytes`` buffer over group ``g`` under ``policy``."""
    return _time(cluster, g, "all_gather", float(nbytes), policy)


def all_to_all(cluster: ClusterSpec, g: network.GroupShape, nbytes: float, policy: str) -> float:
    """Seconds for an all-to-all of ``nbytes`` per member: network.py's pairwise model under every policy.

    Themis schedules reduce-scatter/all-gather phases (Rashidi et al. 2022); an all-to-all has no per-dimension
    reduction to reorder, so the policy leaves it as it is. The entry lets a family (EP, DLRM embeddings) price all
    its collectives through ``COLLECTIVES[op](cluster, shape, nbytes, s.collective_policy)``.
    """
    return network.all_to_all(cluster, g, float(nbytes))


COLLECTIVES = {"all_reduce": all_reduce, "reduce_scatter": reduce_scatter, "all_gather": all_gather,
               "all_to_all": all_to_all}


@lru_cache(maxsize=65536)
def _time(cluster: ClusterSpec, g: network.GroupShape, op: str, nbytes: float, policy: str) -> float:
    if policy == "nccl" or g.size != g.per_node * g.nodes or nbytes <= 0 or g.size <= 1:
        return network.COLLECTIVES[op](cluster, g, nbytes)
    if cluster.dimensions:
        dims = dims_of_shape(cluster, g, nbytes)
        if len(dims) < 2:
            return network.COLLECTIVES[op](cluster, g, nbytes)
        return collective(dims, op, nbytes, policy=policy, chunks=CHUNKS).time
    if g.nodes == 1:
        return network.COLLECTIVES[op](cluster, g, nbytes)
    # all-reduce crosses nodes in log2 steps, as network.py's NCCL double binary tree (NCCL 2.4 trees); the others ring
    dims = dims_of_shape(cluster, g, nbytes, "switch" if op == "all_reduce" else "ring")
    # hierarchical chunked collective, one phase per dimension (Rashidi et al., Themis, ISCA 2022)
    return collective(dims, op, nbytes, policy=policy, chunks=CHUNKS).time
