"""ZeRO-3 as DeepSpeed ran it in 2021 (stage 3 of DeepSpeed 0.3-0.4): one collective per weight tensor.

DeepSpeed's ``partition_parameters.py`` of 2021 gathers every partitioned parameter with its own
``torch.distributed.all_gather`` into a list of ``n`` slices (``_allgather_param``), and stage3.py's
``fetch_sub_module`` waits for them (``_synchronize_communication``: ``torch.cuda.synchronize()``), so no gather
hides behind compute; it reduce-scatters every gradient with its own list ``torch.distributed.reduce_scatter``
(``_reduce_scatter_gradient``), on the compute stream (``overlap_comm`` is off by default). PyTorch's
ProcessGroupNCCL (``torch/lib/c10d/ProcessGroupNCCL.cpp``, 1.8-1.9) runs such a list collective on a flat buffer
and copies each of the ``n`` slices out of it (all-gather) or into it (reduce-scatter), one copy per rank.
Parameters below ``stage3_param_persistence_threshold`` (1e5 elements) stay whole on every rank, and a
parameter that its recompute used is released again unless it is reused within ``stage3_max_reuse_distance``
(1e9 elements) of parameters (stage3.py ``PartitionedParameterCoordinator``). Each gather fills a zeroed
buffer (``torch.zeros`` in ``_allgather_param``); each gradient is first copied into the reduce bucket and divided
by the group size there (stage3.py ``reduce_independent_p_g_buckets_and_remove_grads``, ``average_tensor``), unless
it is larger than the 5e8-element ``reduce_bucket_size`` and reduced where it lies. After every optimizer step the
persistent parameters are all-gathered again in one list all-gather, then copied out rank by rank and parameter by
parameter (stage3.py ``step``: ``persistent_parameters[0].all_gather``; ``_allgather_params``).
"""

from __future__ import annotations

from autoplan.hardware import compute, network
from autoplan.families.transformer.passes import grad_bytes
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

WEIGHT_BYTES = 2                      # fp16/bf16 weights, as gathered
PERSISTENCE_THRESHOLD = 100_000       # DeepSpeed stage3_param_persistence_threshold default (elements)
MAX_REUSE_DISTANCE = 1_000_000_000    # DeepSpeed stage3_max_reuse_distance default (elements)
REDUCE_BUCKET_SIZE = 500_000_000      # DeepSpeed reduce_bucket_size default (elements)


def list_collective_copies(cluster: ClusterSpec, n: int, nbytes: float) -> float:
    """Seconds of the per-rank slice copies of one PyTorch list all-gather or reduce-scatter of an ``nbytes``
    buffer over ``n`` ranks: every byte read and written once, one copy kernel per slice."""
    # ProcessGroupNCCL allgather/reduce_scatter: one copy_ per output/input slice (roofline memory side + launches)
    return compute.memory_time(cluster.gpu, 2 * nbytes, kernels=n)


def tensor_gather(cluster: ClusterSpec, shape: network.GroupShape, nbytes: float) -> float:
    """Seconds of DeepSpeed's gather of one ``nbytes`` weight tensor: zero the buffer, ring, copy the slices out."""
    zeros = compute.memory_time(cluster.gpu, nbytes)
    return zeros + network.all_gather(cluster, shape, nbytes) + list_collective_copies(cluster, shape.size, nbytes)


def tensor_reduce(cluster: ClusterSpec, shape: network.GroupShape, nbytes: float, bucketed: bool = True) -> float:
    """Seconds of DeepSpeed's reduction of one ``nbytes`` gradient: copy into the bucket (``bucketed``), divide by
    the group size (read and write each), copy the slices in, ring reduce-scatter."""
    bucket = compute.memory_time(cluster.gpu, (4 if bucketed else 2) * nbytes, kernels=2 if bucketed else 1)
    return bucket + list_collective_copies(cluster, shape.size, nbytes) + network.reduce_scatter(cluster, shape, nbytes)


def _holders(elements: int, n: int) -> int:
    """Ranks holding a piece of an ``elements`` parameter split into ``n`` partitions of ceil(elements / n)."""
    return -(-elements // -(-elements // n))


def persistent_gather(model: ModelSpec, cluster: ClusterSpec, s: Plan, shape: network.GroupShape) -> float:
    """Seconds of the all-gather of the persistent parameters after every optimizer step: one list all-gather of
    them all, then one copy per parameter and rank holding a piece of it."""
    final_norm = (model.hidden,) * (2 if model.norm == "layernorm" else 1)
    small = [t for m in model.layer_tensors() for t in m if t <= PERSISTENCE_THRESHOLD] * model.layers
    small += list(final_norm)
    nbytes = WEIGHT_BYTES * sum(small) / s.tp
    n = shape.size
    copies = sum(_holders(max(1, t // s.tp), n) for t in small)
    ring = network.all_gather(cluster, shape, nbytes) + list_collective_copies(cluster, n, nbytes)
    return ring + compute.memory_time(cluster.gpu, 2 * nbytes, kernels=copies)


def layer_gathers(model: ModelSpec, cluster: ClusterSpec, s: Plan,
                  shape: network.GroupShape) -> tuple[float, float]:
    """Seconds of one layer's gathers before its forward, and of the re-gathers its backward adds after a full
    recompute (the tensors released between their recompute and their backward)."""
    modules = model.layer_tensors()
    forward = regather = 0.0
    for i, tensors in enumerate(modules):
        later = sum(sum(m) for m in modules[i + 1:])
        for t in tensors:
            if t <= PERSISTENCE_THRESHOLD:
                continue
            seconds = tensor_gather(cluster, shape, WEIGHT_BYTES * t / s.tp)
            forward += seconds
            # between a sub-module's recompute and its backward run the later sub-modules' recompute and backward;
            # ZeRO-Infinity (arXiv 2104.07857 §4.1) counts the weights loaded twice in a checkpointed backward
            if s.recompute == "full" and 2 * later > MAX_REUSE_DISTANCE:
                regather += seconds
    return forward, regather


def layer_reduce(model: ModelSpec, cluster: ClusterSpec, s: Plan, shape: network.GroupShape) -> float:
    """Seconds of one layer's gradient reduce-scatters, one per parameter tensor (persistent ones too)."""
    return sum(tensor_reduce(cluster, shape, grad_bytes(s) * t / s.tp, bucketed=t <= REDUCE_BUCKET_SIZE)
               for tensors in model.layer_tensors() for t in tensors)


def exposed(layers: int, gather: float, regather: float, reduce: float) -> tuple[float, float]:
    """Seconds of a forward and a backward pass of ``layers`` layers that wait on their blocking collectives:
    every gather before its layer's forward, gather, re-gather and reduce-scatter in the backward."""
    return layers * gather, layers * (gather + regather + reduce)
