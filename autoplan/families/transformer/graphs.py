"""Full-iteration CUDA graphs (``TransformerPlan.cuda_graphs``): a plan's kernels as a replayed graph runs them."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Callable, TypeVar

from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

T = TypeVar("T")


def graphed(cluster: ClusterSpec, s: Plan) -> ClusterSpec:
    """``cluster`` as plan ``s``'s kernels see it: under a full-iteration CUDA graph each kernel costs the graph's
    per-node launch (``GPUSpec.graph_kernel_overhead``, where measured) and the host issues nothing, so its launch
    time never binds; else ``cluster`` itself."""
    if not s.cuda_graphs:
        return cluster
    # a graph replay launches its nodes back to back from the GPU's work queue (CUDA Programming Guide, "CUDA
    # Graphs": "reducing CPU launch costs"); the host launches the graph once
    gpu = cluster.gpu
    return replace(cluster, gpu=replace(gpu, kernel_overhead=gpu.graph_kernel_overhead or gpu.kernel_overhead,
                                        host_launch=0.0))


def under_graphs(cost: Callable[..., T]) -> Callable[..., T]:
    """``cost(model, cluster, s, ...)`` priced on ``graphed(cluster, s)``."""
    @functools.wraps(cost)
    def priced(model: ModelSpec, cluster: ClusterSpec, s: Plan, *args, **kwargs) -> T:
        return cost(model, graphed(cluster, s), s, *args, **kwargs)
    return priced
