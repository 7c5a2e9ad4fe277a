"""What a plan asks of the GPU and the node beyond their counts: FP8 tensor cores, MXFP8 block scaling, and the
in-node share of a hierarchical context-parallel group."""

from __future__ import annotations

from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan


def cp_a2a_degree(s: Plan, gpus_per_node: int) -> int:
    """CP ranks that exchange by all-to-all: all of them (``a2a``), those sharing a node (``a2a+p2p``: Megatron-Core
    hierarchical CP, all-to-all inside the node and a ring across), or none (``p2p``: 1)."""
    if s.cp_comm == "p2p" or s.cp == 1:
        return 1
    if s.cp_comm == "a2a":
        return s.cp
    # Megatron rank order tp, cp, …: CP neighbours are tp ranks apart, gpus_per_node // tp of them per node
    per_node = max(1, min(s.cp, gpus_per_node // s.tp))
    while s.cp % per_node:
        per_node -= 1
    return per_node


def hardware_violations(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[str]:
    """Reasons plan ``s`` cannot run on ``cluster``'s GPUs and nodes (FP8 support, hierarchical CP heads); []."""
    out = [reason] if (reason := precision_reason(cluster, s.precision)) else []
    if getattr(s, "activation_offload_layers", 0) and not cluster.gpu.host_link:
        out.append(f"activation offload needs the GPU's host link (host_link_gb_per_s) in cluster spec {cluster.name!r}")
    if getattr(s, "optimizer_offload_pct", 0) and not (cluster.gpu.host_link and cluster.gpu.host_adam_params_per_s):
        out.append(f"optimizer offload needs host_link_gb_per_s and host_adam_params_per_s in cluster spec "
                   f"{cluster.name!r}")
    if s.cp_comm == "a2a+p2p" and s.cp > 1:
        a2a = cp_a2a_degree(s, cluster.domain_gpus)
        if model.heads % (a2a * s.tp):
            out.append(f"cp_comm a2a+p2p: attention heads {model.heads} are not divisible by tp·(CP ranks per node) "
                       f"= {s.tp}·{a2a}")
    return out


def precision_reason(cluster: ClusterSpec, precision: str) -> str:
    """Why ``cluster``'s GPUs cannot train in ``precision`` ("" if they can)."""
    gpu = cluster.gpu
    if precision != "bf16" and not gpu.fp8_peak_flops:
        # NVIDIA A100 datasheet: Ampere tensor cores have no FP8 (FP8 came with Hopper, H100 whitepaper)
        return f"precision {precision} needs FP8 tensor cores; the {gpu.name} has none (Hopper or later)"
    if precision == "mxfp8" and not gpu.mxfp8:
        # Transformer Engine docs, MXFP8BlockScaling: block-scaled MXFP8 GEMMs need Blackwell tensor cores
        return (f"precision mxfp8 needs Blackwell tensor cores (MX block scaling); the {gpu.name} has none "
                "(use fp8 or fp8-blockwise)")
    return ""


def unsupported_precisions(cluster: ClusterSpec, precisions: list[str] | tuple[str, ...]) -> str:
    """An error when no precision of a search space runs on ``cluster`` ("" when at least one does)."""
    reasons = [precision_reason(cluster, p) for p in precisions]
    return "" if not all(reasons) else "; ".join(reasons)
