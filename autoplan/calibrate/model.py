"""The one door from the calibration package to the rest of autoplan: specs, the kernel and collective cost models,
the simulator and the validation-file helpers. Everything else in ``autoplan/calibrate`` imports from here."""

from __future__ import annotations

from dataclasses import replace

from autoplan.families.transformer import layer
from autoplan.hardware import network
from autoplan.hardware.compute import gemm_time, memory_time
from autoplan.families.transformer.layer import layer_gemm_shapes
from autoplan.families.registry import violations as family_violations
from autoplan.hardware.network import GroupShape
from autoplan.errors import SpecError
from autoplan.files import write_atomic
from autoplan.sim.simulate import evaluate, score
from autoplan.families.catalog import get_model, list_models
from autoplan.specs.files import read_toml
from autoplan.specs.cluster import ClusterSpec, GPUSpec, NetworkTier, load_cluster, specs_dir
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy
from autoplan.specs.plan import data_parallel
import autoplan.validate as _validate
import autoplan.validate.files  # noqa: F401  (submodules read through ``validation``)
import autoplan.validate.others  # noqa: F401
import autoplan.validate.transformer  # noqa: F401

__all__ = ["ClusterSpec", "GPUSpec", "GroupShape", "ModelSpec", "NetworkTier", "SpecError", "Strategy",
           "attention_time", "collective_time", "data_parallel", "gemm_time", "get_model", "layer_gemm_shapes",
           "list_models", "load_cluster", "memory_time", "read_toml", "specs_dir", "step_time", "validation",
           "write_atomic", "at_gpus"]

validation = _validate
"""``autoplan.validate``: the public-run file's loader and its case → model, cluster, plans mapping."""


def attention_time(gpu: GPUSpec, batch: int, heads: int, seq_q: int, seq_kv: int, head_dim: int,
                   backward: bool) -> float:
    """Seconds of one fused causal attention (forward, or its backward) as the cost model prices it."""
    model = ModelSpec(name="attention-probe", layers=1, hidden=heads * head_dim, heads=heads, head_dim=head_dim,
                      ffn_hidden=4 * heads * head_dim, vocab=128, seq_len=max(seq_q, seq_kv), dropout=False)
    cluster = ClusterSpec(name="probe", description="", gpu=gpu, gpus_per_node=1,
                          tiers=(NetworkTier(name="none", gpus=1, bandwidth=1.0, efficiency=1.0, latency=0.0),),
                          flash_attention=True)
    fwd, bwd = layer.attention_ops(cluster, model, batch, seq_q, seq_kv, heads, False)
    return bwd.seconds if backward else fwd.seconds


_COLLECTIVES = {"all_reduce": network.all_reduce, "all_gather": network.all_gather,
                "reduce_scatter": network.reduce_scatter, "all_to_all": network.all_to_all}


def collective_time(cluster: ClusterSpec, op: str, ranks: int, per_node: int, nbytes: float) -> float:
    """Seconds of one collective (nccl-tests' size convention) over ``ranks`` GPUs, ``per_node`` on each node."""
    nodes = -(-ranks // per_node)
    if op == "send_recv":
        return network.send_recv(cluster, nodes == 1, nbytes)
    span = ranks if nodes == 1 else nodes * cluster.gpus_per_node
    shape = GroupShape(size=ranks, per_node=per_node, nodes=nodes, span=span)
    return _COLLECTIVES[op](cluster, shape, nbytes)


def at_gpus(cluster: ClusterSpec, gpus: int) -> ClusterSpec:
    """``cluster`` sized to ``gpus`` GPUs; fewer than a node: one node holding only those GPUs."""
    if gpus >= cluster.gpus_per_node and gpus % cluster.gpus_per_node == 0:
        return cluster.with_gpus(gpus)
    if gpus < cluster.gpus_per_node:
        return replace(cluster, gpus_per_node=gpus, nodes=1, nvlink_domain_gpus=0)
    raise SpecError(f"{gpus} GPUs do not fill whole {cluster.name} nodes of {cluster.gpus_per_node}")


def step_time(model: ModelSpec, cluster: ClusterSpec, plan: Strategy) -> float | None:
    """Simulated seconds of one training step of ``plan``; a plan over the memory model's capacity is timed anyway
    (a measured run ran); None if the plan is invalid."""
    if family_violations(model, cluster.gpus, plan):
        return None
    e = evaluate(model, cluster, plan)
    if e.metrics is not None:
        return e.metrics.step_time
    # over the memory model's capacity (peak_memory set): timed all the same; otherwise invalid on this hardware
    return score(model, cluster, plan).step_time if e.peak_memory else None
