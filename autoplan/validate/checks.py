"""Memory and bus-bandwidth figures: measured peaks of real runs (accuracy), and two consistency checks that are
not accuracy: the memory formulas against the paper's own formulas (Korthikanti et al. 2022 Figs. 1/7) and the
NCCL efficiencies against the nccl-tests rows they were set from."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from autoplan.families.registry import memory_per_stage as family_memory
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.memory import memory_per_stage
from autoplan.hardware import network
from autoplan.specs.cluster import load_cluster
from autoplan.specs.model import ModelSpec
from autoplan.validate.files import MEMORY_METRICS
from autoplan.validate.results import CheckResult
from autoplan.validate.transformer import _GPU_CLUSTERS, cluster_of, group_of, model_of, needs_of, plan_space

GIB = 1024**3
FORMULA_CHECK = "memory formulas vs Korthikanti et al. 2022 Figs. 1/7 (formula against formula)"
NCCL_CHECK = "bus bandwidth vs the nccl-tests rows the tier efficiencies were set from"


def _table5_plan(mc: dict, cases: list[dict]) -> tuple[ModelSpec, Strategy, int] | None:
    """The Table 5 run of the memory case's model (memory cases reuse those plans)."""
    size = mc["id"].rsplit("-", 1)[-1].lower()
    for case in cases:
        if group_of(case).startswith("Korthikanti") and f"-{size}-" in case["id"].lower() + "-":
            st, gpus = case["strategy"], case["hardware"]["num_gpus"]
            v = st.get("virtual_stages_per_rank") or 1
            plan = Strategy(tp=st["tp"], pp=st["pp"], dp=st["dp"], micro_batch=st["microbatch"],
                            global_batch=st["global_batch"], schedule="interleaved" if v > 1 else "1f1b",
                            virtual_stages=v)
            return model_of(case["model"]), plan, gpus
    return None


def run_memory_case(mc: dict, cases: list[dict]) -> list[CheckResult]:
    """Weights+gradients+optimizer and activations (no recompute; SP+selective) per GPU, against the figures.

    The references count transformer layers only, so the stage with the fewest non-layer weights is compared.
    """
    found = _table5_plan(mc, cases)
    ref = mc["reference_gib_per_gpu"]
    if found is None:
        return [CheckResult(id=mc["id"], quantity=k, reference=v, predicted=None, unit="GiB", note="no matching run")
                for k, v in ref.items()]
    model, plan, gpus = found
    cluster = load_cluster("dgx-a100-80g", gpus)
    stage = 1 if plan.pp > 2 else 0
    base = memory_per_stage(model, cluster, plan)[stage]
    none = memory_per_stage(model, cluster, replace(plan, recompute="none"))[0]
    seqsel = memory_per_stage(model, cluster, replace(plan, recompute="selective", sequence_parallel=True))[0]
    predicted = {"params_grads_optimizer": (base.weights + base.gradients + base.optimizer) / GIB,
                 "activations_none": none.activations / GIB, "activations_seqsel": seqsel.activations / GIB}
    return [CheckResult(id=mc["id"], quantity=k, reference=float(v), predicted=predicted.get(k), unit="GiB",
                        group=FORMULA_CHECK) for k, v in ref.items()]


def run_bandwidth_case(bc: dict) -> CheckResult:
    """nccl-tests bus bandwidth of the case's collective on the matching cluster spec, 8 GiB messages."""
    hw, scope, op = str(bc.get("hardware", "")), str(bc.get("scope", "")), str(bc.get("op", ""))
    ref = bc.get("busbw_gbps") or bc.get("busbw_gbps_avg") or bc.get("busbw_gbps_per_nic")
    if isinstance(ref, str) and "-" in ref:
        lo, hi = (float(x) for x in ref.split("-"))
        ref = (lo + hi) / 2
    gpu = next((k for k in _GPU_CLUSTERS if k in hw), None)
    nic = "NDR" in hw or "400" in hw
    if ref is None:
        return CheckResult(id=bc["id"], quantity=op, reference=float("nan"), predicted=None, unit="GB/s",
                           note="not a collective benchmark (no bus bandwidth)")
    if gpu is None and not nic:
        return CheckResult(id=bc["id"], quantity=op, reference=float(ref), predicted=None, unit="GB/s",
                           note="no cluster spec of this hardware")
    cluster = load_cluster(_GPU_CLUSTERS.get(gpu or "H100"), 64)
    nbytes = 8 * GIB
    if "4x HDR" in hw or "4x 200" in hw or "4xHDR" in hw:
        # half the NICs of a DGX A100: half the per-GPU inter-node bandwidth
        cluster = replace(cluster, tiers=(cluster.tiers[0],) + tuple(replace(t, bandwidth=t.bandwidth / 2)
                                                                     for t in cluster.tiers[1:]))
    if "up to 128 MB" in scope:
        nbytes = 128 * 2**20
    if "per NIC" in scope or "inter-node" in scope and nic:
        g = network.group_shape(cluster.gpus_per_node, 16, cluster.gpus_per_node)
    elif "inter-node" in scope:
        n = int(next(w for w in scope.replace(",", " ").split() if w.isdigit()))
        g = network.group_shape(cluster.gpus_per_node, n, 1)
    else:
        g = network.group_shape(cluster.gpus_per_node, cluster.gpus_per_node, 1)
    ring_only = "RING" in op or "reduce_scatter" in op or "ring" in op
    kind = "reduce_scatter" if ring_only else "all_reduce"
    seconds = network.reduce_scatter(cluster, g, nbytes) if ring_only else network.all_reduce(cluster, g, nbytes)
    return CheckResult(id=bc["id"], quantity=f"{kind} over {g.size} GPUs ({g.per_node}/node)", reference=float(ref),
                       predicted=network.bus_bandwidth(kind, g.size, nbytes, seconds) / 1e9, unit="GB/s",
                       group=NCCL_CHECK)


def run_memory_run(run: dict, where: Path | None = None) -> CheckResult:
    """A measured peak (PyTorch's max allocated, else max reserved, on the fullest GPU) against the memory model's
    tensors on the fullest stage: its total less the spec's reserve for the CUDA context and NCCL, which PyTorch's
    counters do not see (allocated also leaves out the caching allocator's slack, reserved keeps it)."""
    gpus = run["hardware"]["num_gpus"]
    model, cluster = model_of(run["model"], where), cluster_of(run["hardware"], gpus)
    plans, searched = plan_space(run, model, gpus)
    measured = run["measured"]
    metric = next(k for k in MEMORY_METRICS if k in measured)
    group = str(run.get("group", "measured memory"))
    if not plans:
        return CheckResult(id=run["id"], quantity=metric, reference=float(measured[metric]), predicted=None,
                           unit="GiB", note="the published plan is invalid for this model", group=group)
    plan = plans[0]
    stages = family_memory(model, cluster, plan)
    tensors = max(m.total - m.reserve for m in stages) / GIB
    fits = max(m.total for m in stages) <= cluster.gpu.hbm_bytes
    note = ("searched " + ", ".join(searched) + "; " if searched else "") + plan.short()
    needs = needs_of(run)
    if needs:
        note += "; also ran with " + ", ".join(needs) + " (not modelled)"
    return CheckResult(id=run["id"], quantity=metric, reference=float(measured[metric]), predicted=tensors,
                       unit="GiB", note=note if fits else note + "; predicted NOT to fit", group=group)
