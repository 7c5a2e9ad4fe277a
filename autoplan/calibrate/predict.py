"""The cost model's time for each measurement, on a cluster with trial parameter values."""

from __future__ import annotations

from dataclasses import replace

from autoplan.calibrate.measurements import Collective, Kernel, Step
from autoplan.calibrate.model import (ClusterSpec, SpecError, Strategy, at_gpus, attention_time, collective_time,
                                      gemm_time, memory_time, step_time)


def kernel_seconds(cluster: ClusterSpec, k: Kernel) -> float:
    """Predicted seconds of kernel ``k`` on the one GPU it was timed on; a microbenchmark's bursts run at the
    quoted clock (clock_ratio 1)."""
    gpu = replace(cluster.gpu, job_gpus=1) if k.sustained else replace(cluster.gpu, clock_ratio=1.0, job_gpus=1)
    if k.kind in ("gemm", "gemm_fp8"):
        m, n, kk, batch = k.shape
        return gemm_time(gpu, m, n, kk, batch, k.kind == "gemm_fp8", k.out_bytes)
    if k.kind in ("attention", "attention_bwd"):
        b, heads, sq, skv, d = k.shape
        return attention_time(gpu, b, heads, sq, skv, d, k.kind == "attention_bwd")
    if k.kind == "memory":
        return memory_time(gpu, float(k.shape[0]))
    if k.kind == "launch":
        return gpu.kernel_overhead
    raise SpecError(f"{k.where}: unknown kernel kind {k.kind!r}")


def collective_seconds(cluster: ClusterSpec, c: Collective) -> float:
    """Predicted seconds of collective ``c``."""
    return collective_time(cluster, c.op, c.ranks, c.per_node, c.nbytes)


def step_cluster(cluster: ClusterSpec, s: Step) -> ClusterSpec:
    """``cluster`` as the step ran: its GPU count and any GPU fields its hardware differs in."""
    sized = at_gpus(cluster, s.gpus)
    if s.gpu_overrides:
        sized = replace(sized, gpu=replace(sized.gpu, **dict(s.gpu_overrides)))
    if s.flash_attention is not None:
        sized = replace(sized, flash_attention=s.flash_attention)
    if s.flash2_attention:
        sized = replace(sized, gpu=sized.gpu.with_flash2_attention(s.deterministic_attention))
    elif s.deterministic_attention:
        sized = replace(sized, gpu=sized.gpu.with_deterministic_attention())
    if not s.nvls:
        sized = sized.without_nvls()
    return sized


def best_plan(cluster: ClusterSpec, s: Step) -> tuple[Strategy, float]:
    """The fastest of the step's plans on ``cluster`` and its predicted seconds (the plan a source left open is
    searched, as ``autoplan validate`` does)."""
    sized = step_cluster(cluster, s)
    best: tuple[Strategy, float] | None = None
    for plan in s.plans:
        t = step_time(s.model, sized, plan)
        if t is not None and (best is None or t < best[1]):
            best = (plan, t)
    if best is None:
        raise SpecError(f"{s.where}: no plan of this step is valid on {cluster.name} "
                        f"({len(s.plans)} tried, e.g. {s.plans[0].short()})")
    return best


def step_seconds(cluster: ClusterSpec, s: Step, plan: Strategy) -> float:
    """Predicted seconds of step ``s`` run with ``plan``."""
    t = step_time(s.model, step_cluster(cluster, s), plan)
    if t is None:
        raise SpecError(f"{s.where}: plan {plan.short()} is not valid on {cluster.name}")
    return t
