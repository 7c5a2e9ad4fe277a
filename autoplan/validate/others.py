"""CNN runs (``cnn_cases``) and recommendation-model runs (``dlrm_cases``): each case's plan as its code ran it."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from autoplan.errors import SpecError
from autoplan.families.catalog import get_model
from autoplan.families.cnn.spec import build
from autoplan.families.dlrm.spec import dlrm_of
from autoplan.families.registry import violations as family_violations
from autoplan.families.strategy import Strategy
from autoplan.sim.simulate import evaluate, score
from autoplan.specs.cluster import ClusterSpec, load_cluster
from autoplan.specs.model import ModelSpec
from autoplan.validate.files import CNN_METRICS
from autoplan.validate.results import CaseResult, gpu_constants
from autoplan.validate.transformer import hbm_bytes_of

_CNN_KNOBS = ("dp", "pp", "spatial", "channel", "filter", "micro_batch", "global_batch", "schedule", "recompute",
              "overlap_grad_reduce")


def _at_gpus(base: ClusterSpec, gpus: int) -> ClusterSpec:
    """``base`` at ``gpus`` GPUs; a single-GPU measurement: one node holding only that GPU."""
    return base.with_gpus(gpus) if gpus >= base.gpus_per_node else replace(base, gpus_per_node=gpus, nodes=1)


def _check_knobs(strategy: dict, allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(strategy) - set(allowed))
    if unknown:
        raise SpecError(f"unknown strategy key(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")


def _timed_case(case: dict, group: str, metric: str, model: ModelSpec, cluster: ClusterSpec, plan: Strategy,
                predicted_of: Callable[[float], float], kind: str) -> CaseResult:
    """The case's plan simulated: ``predicted_of(step seconds)`` against the measured ``metric``, or the reasons."""
    measured = float(case["measured"][metric])
    gap = " ".join(str(case.get("known_gap") or "").split())
    common = dict(id=case["id"], group=group, metric=metric, measured=measured, plan=plan, kind=kind,
                  gpu=cluster.gpu.name, constants=gpu_constants(cluster.gpu), known_gap=gap,
                  calibration=str(case.get("calibration") or ""))
    reasons = family_violations(model, cluster.gpus, plan)
    if reasons:
        return CaseResult(predicted=None, note="; ".join(reasons), **common)
    e = evaluate(model, cluster, plan)
    # a run that was measured ran: one the memory model says does not fit is timed anyway, and flagged
    metrics = e.metrics or score(model, cluster, plan)

    def rerun(change: Callable[[ClusterSpec], ClusterSpec]) -> float:
        return predicted_of(score(model, change(cluster), plan).step_time)
    return CaseResult(predicted=predicted_of(metrics.step_time), rerun=rerun,
                      note="" if e.feasible else "over the memory model's capacity: " + "; ".join(e.violations),
                      **common)


def run_cnn_case(case: dict) -> CaseResult:
    """Predict one CNN run: the case's plan on the case's cluster, the model built at the case's input size."""
    m, hw, st = case["model"], case["hardware"], case["strategy"]
    model = build(str(m["name"]), m["image_size"], m.get("dtype_bytes", 2), str(m.get("framework", "pytorch")))
    cluster = _at_gpus(load_cluster(str(hw.get("cluster", "abci-v100"))), hw["num_gpus"])
    _check_knobs(st, _CNN_KNOBS)
    plan = Strategy(**st)
    metric = next(k for k in CNN_METRICS if k in case["measured"])
    per = plan.global_batch if metric == "seconds_per_sample" else 1
    return _timed_case(case, str(case.get("group", "CNN")), metric, model, cluster, plan, lambda t: t / per, "cnn")


_DLRM_KNOBS = ("micro_batch", "global_batch", "sharding")
_DLRM_AS_RUN = ("bottom_mlp_placement", "table_placement", "pooled_comm_bytes", "framework")
_DLRM_HARDWARE = ("cluster", "num_gpus", "gpu", "hbm_gib", "hbm_bandwidth_gb_per_s")


def dlrm_model(m: dict) -> ModelSpec:
    """The catalog DLRM ``m['name']``, its tables' rows scaled by one factor to ``m['embedding_params']`` if given,
    its bottom MLP, tables, all-to-all and collectives as ``m['bottom_mlp_placement']``, ``m['table_placement']``,
    ``m['pooled_comm_bytes']`` and ``m['framework']`` say if given.

    The frequency-thresholded Criteo 1TB variants of NVIDIA's DLRM (FL=15/3/2) publish only their total embedding
    size, not per-table rows: scaling the MLPerf table sizes uniformly to that total is this file's assumption."""
    base = get_model(str(m["name"]))
    if dlrm_of(base) is None:
        raise SpecError(f"model {base.name!r} is not a DLRM (family {base.family!r})")
    spec = base.structure
    # how the source's code runs the model: where the bottom MLP runs, how it places the tables, what the all-to-all
    # carries (families/dlrm/spec.py BOTTOM_MLP_PLACEMENTS, TABLE_PLACEMENTS, DLRMSpec.pooled_comm_bytes)
    for key in _DLRM_AS_RUN:
        if key in m:
            spec = replace(spec, **{key: m[key]})
            base = replace(base, name=f"{base.name}+{key}={m[key]}", structure=spec)
    if not m.get("embedding_params"):
        return base
    k = float(m["embedding_params"]) / sum(t.params for t in spec.tables)
    tables = tuple(replace(t, rows=max(1, round(t.rows * k))) for t in spec.tables)
    return replace(base, name=f"{base.name}@{float(m['embedding_params']):.3g}", structure=replace(spec, tables=tables))


def dlrm_cluster(hw: dict) -> ClusterSpec:
    """The case's cluster at its GPU count; ``hbm_gib`` and ``hbm_bandwidth_gb_per_s`` override the GPU's datasheet
    memory (the 40 GB A100 in an 80 GB A100 spec)."""
    unknown = sorted(set(hw) - set(_DLRM_HARDWARE))
    if unknown:
        raise SpecError(f"unknown hardware key(s) {', '.join(unknown)}; allowed: {', '.join(_DLRM_HARDWARE)}")
    base, gpus = load_cluster(str(hw.get("cluster", "dgx-a100-80g"))), hw["num_gpus"]
    gpu = base.gpu
    if hw.get("hbm_gib"):
        gpu = replace(gpu, hbm_bytes=hbm_bytes_of(hw))
    if hw.get("hbm_bandwidth_gb_per_s"):
        gpu = replace(gpu, hbm_bandwidth=float(hw["hbm_bandwidth_gb_per_s"]) * 1e9)
    return _at_gpus(replace(base, gpu=gpu), gpus)


def run_dlrm_case(case: dict) -> CaseResult:
    """Predict one DLRM run: samples per second of the case's plan (MLPs data-parallel on every GPU)."""
    m, hw, st = case["model"], case["hardware"], case["strategy"]
    model, cluster = dlrm_model(m), dlrm_cluster(hw)
    _check_knobs(st, _DLRM_KNOBS)
    gpus = cluster.gpus
    plan = Strategy(dp=gpus, **{"micro_batch": st["global_batch"] // gpus, **st})
    return _timed_case(case, str(case.get("group", "DLRM")), "samples_per_s", model, cluster, plan,
                       lambda t: plan.global_batch / t, "dlrm")
