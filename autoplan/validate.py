"""Fidelity: predictions against published, measured training runs (``autoplan validate``).

Each case is mapped to a model, the cluster spec of its hardware and its published plan. Knobs the source
did not publish are searched (only those) and the fastest plan that fits is reported, flagged as such.
Nothing here depends on a case's id: the same rules map every case of a file of this schema.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from statistics import mean
from typing import Callable, TypeVar

from autoplan.specs.files import excerpt, read_yaml

from autoplan.hardware import network
from autoplan.families.registry import violations as family_violations
from autoplan.families.transformer.memory import memory_per_stage
from autoplan.errors import SpecError
from autoplan.sim.simulate import evaluate, score
from autoplan.families.cnn.spec import build
from autoplan.families.catalog import get_model, list_models
from autoplan.families.dlrm.spec import dlrm_of
from autoplan.specs.cluster import ClusterSpec, load_cluster
from autoplan.specs.layout import V_SHAPE, balanced_layout, balanced_v_layout
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import KNOBS, Strategy
from autoplan.specs.plan import data_parallel

GIB = 1024**3
T = TypeVar("T")
# Megatron-LM of 2021-22 (the SC'21 and 2022 papers' code) all-reduced gradients after the backward pass
# (overlap came with Megatron-Core's DDP in 2023), and its p2p_communication.py waited on every pipeline
# transfer (batch_isend_irecv, req.wait(), torch.cuda.synchronize()): no overlap of either with compute.
_SYNCHRONOUS_MEGATRON_SOURCES = ("2104.04473", "2205.05198")
_GPU_CLUSTERS = {"A100": "dgx-a100-80g", "H100": "dgx-h100-80g", "H800": "dgx-h800-80g"}


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    """One published run against its prediction."""

    id: str
    group: str
    metric: str
    """``iteration_time_s`` or ``tflops_per_gpu`` (hardware FLOPs, Megatron SC'21 eq. 3)."""
    measured: float
    predicted: float | None
    plan: Strategy | None
    searched: tuple[str, ...] = ()
    """Knobs the source did not publish, searched here (the fastest feasible plan is reported)."""
    note: str = ""
    known_gap: str = ""
    """Why the file marks this run as a known gap of the model (its error is shown, not counted in summaries)."""

    @property
    def error_pct(self) -> float | None:
        """Signed error of the prediction, in % of the measured value."""
        return None if self.predicted is None else 100 * (self.predicted - self.measured) / self.measured


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """A memory or bus-bandwidth reference against its prediction."""

    id: str
    quantity: str
    reference: float
    predicted: float | None
    unit: str
    note: str = ""

    @property
    def error_pct(self) -> float | None:
        """Signed error in % of the reference."""
        return None if self.predicted is None else 100 * (self.predicted - self.reference) / self.reference


@dataclass(frozen=True, kw_only=True)
class Report:
    """Everything ``autoplan validate`` prints."""

    cases: list[CaseResult]
    memory: list[CheckResult] = field(default_factory=list)
    bandwidth: list[CheckResult] = field(default_factory=list)
    cnn: list[CaseResult] = field(default_factory=list)
    """CNN runs (``cnn_cases``), summarised apart from the transformer runs."""
    dlrm: list[CaseResult] = field(default_factory=list)
    """DLRM runs (``dlrm_cases``), summarised apart from the transformer and CNN runs."""

    def groups(self) -> dict[str, list[CaseResult]]:
        """Cases by group, in file order."""
        out: dict[str, list[CaseResult]] = {}
        for c in self.cases:
            out.setdefault(c.group, []).append(c)
        return out

    @staticmethod
    def summary(rows: list) -> dict[str, float]:
        """Mean and max |error| (%) over rows that have a prediction (known gaps left out)."""
        errs = [abs(r.error_pct) for r in rows if r.error_pct is not None and not getattr(r, "known_gap", "")]
        return {"n": len(errs), "mean_abs_pct": mean(errs) if errs else float("nan"),
                "max_abs_pct": max(errs) if errs else float("nan")}


def default_file() -> Path:
    """The published runs shipped with autoplan (a copy of shared/validation/public.yaml)."""
    return Path(str(resources.files("autoplan") / "data" / "public.yaml"))


def load(path: Path | None = None) -> dict:
    """Read a validation file of public.yaml's schema (its cases checked: ``check_cases``)."""
    path = Path(path) if path else default_file()
    where = f"validation file {str(path)!r}"
    data = read_yaml(path, "validation")
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise SpecError(f"{where} has no 'cases' list")
    check_cases(data, where)
    return data


_MODEL_KEYS = ("layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len")


def _positive(value: object, what: str, *, integer: bool = True, optional: bool = False) -> None:
    if optional and (value is None or (isinstance(value, str) and "not stated" in value)):
        return
    kinds = (int,) if integer else (int, float)
    if not isinstance(value, kinds) or isinstance(value, bool) or not 0 < value < float("inf"):
        kind = "a positive integer" if integer else "a positive number"
        raise SpecError(f"{what} must be {kind}, got {excerpt(value)}")


def _table(parent: dict, key: str, where: str) -> dict:
    value = parent.get(key)
    if not isinstance(value, dict):
        raise SpecError(f"{where}: {key} must be a mapping, got {value!r}")
    return value


def _list(data: dict, key: str, where: str) -> list:
    """``data[key]`` (a list of mappings; [] when absent)."""
    items = data.get(key, [])
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise SpecError(f"{where}: {key} must be a list of mappings")
    return items


def check_cases(data: dict, where: str) -> None:
    """Every key the predictions read, with the type it must have; errors name the file, case and key."""
    for i, case in enumerate(data["cases"], 1):
        if not isinstance(case, dict):
            raise SpecError(f"{where}: case #{i} must be a mapping, got {case!r}")
        at = f"{where}: case #{i} ({str(case.get('id', '?'))[:60]!r})"
        hw, model, st = (_table(case, k, at) for k in ("hardware", "model", "strategy"))
        measured = _table(case, "measured", at)
        _positive(hw.get("num_gpus"), f"{at}: hardware.num_gpus")
        for key in _MODEL_KEYS:
            _positive(model.get(key), f"{at}: model.{key}")
        for key in ("kv_heads", "head_dim"):
            _positive(model.get(key) or None, f"{at}: model.{key}", optional=True)
        _positive(st.get("global_batch"), f"{at}: strategy.global_batch")
        for key in ("tp", "pp", "cp", "dp", "microbatch", "virtual_stages_per_rank", "ep", "etp"):
            _positive(st.get(key) or None, f"{at}: strategy.{key}", optional=True)
        metric = next((k for k in ("iteration_time_s", "tflops_per_gpu", "tokens_per_s_per_gpu") if k in measured),
                      None)
        if metric is None:
            raise SpecError(f"{at}: measured needs iteration_time_s, tflops_per_gpu or tokens_per_s_per_gpu")
        _positive(measured[metric], f"{at}: measured.{metric}", integer=False)
    for i, mc in enumerate(_list(data, "memory_cases", where), 1):
        at = f"{where}: memory case #{i}"
        ref = _table(mc, "reference_gib_per_gpu", at)
        for key, value in ref.items():
            _positive(value, f"{at}: reference_gib_per_gpu.{key}", integer=False)
    _list(data, "collective_bandwidth", where)
    for i, case in enumerate(_list(data, "cnn_cases", where), 1):
        at = f"{where}: CNN case #{i} ({str(case.get('id', '?'))[:60]!r})"
        hw, model, st, measured = (_table(case, k, at) for k in ("hardware", "model", "strategy", "measured"))
        _positive(hw.get("num_gpus"), f"{at}: hardware.num_gpus")
        _positive(model.get("image_size"), f"{at}: model.image_size")
        for key in ("dp", "micro_batch", "global_batch"):
            _positive(st.get(key), f"{at}: strategy.{key}")
        metric = next((k for k in CNN_METRICS if k in measured), None)
        if metric is None:
            raise SpecError(f"{at}: measured needs one of {', '.join(CNN_METRICS)}")
        _positive(measured[metric], f"{at}: measured.{metric}", integer=False)
    for i, case in enumerate(_list(data, "dlrm_cases", where), 1):
        at = f"{where}: DLRM case #{i} ({str(case.get('id', '?'))[:60]!r})"
        hw, model, st, measured = (_table(case, k, at) for k in ("hardware", "model", "strategy", "measured"))
        _positive(hw.get("num_gpus"), f"{at}: hardware.num_gpus")
        _positive(model.get("embedding_params"), f"{at}: model.embedding_params", integer=False,
                  optional=True)
        _positive(st.get("global_batch"), f"{at}: strategy.global_batch")
        _positive(measured.get("samples_per_s"), f"{at}: measured.samples_per_s", integer=False)


def group_of(case: dict) -> str:
    """A short group name from the source: the 2022 paper, the SC'21 table, NVIDIA's recipes."""
    src = str(case.get("group", "")) + str(case.get("source", ""))
    if "2205.05198" in src:
        return "Korthikanti 2022 (A100)"
    if "2104.04473" in src and "Table 2" in src:
        return "SC'21 Table 2, ZeRO-3 vs PTD-P (A100)"
    if "2104.04473" in src:
        return "Megatron SC'21 (A100)"
    if "H100" in str(case.get("hardware", {}).get("gpu", "")) and case.get("model", {}).get("experts"):
        return "MoE: NVIDIA H100 recipes" + (", FP8" if precision_of(case) != "bf16" else "")
    if "H100" in str(case.get("hardware", {}).get("gpu", "")):
        return "NVIDIA H100 recipes" + (", FP8" if precision_of(case) != "bf16" else "")
    return str(case.get("group", "other"))


def model_of(m: dict) -> ModelSpec:
    """The catalog model of the same shape (seq_len as run), else a GPT-style model of that shape."""
    kv = m.get("kv_heads") or m["heads"]
    for spec in list_models():
        if (spec.layers, spec.hidden, spec.heads, spec.kv_heads, spec.ffn_hidden, spec.vocab) == (
                m["layers"], m["hidden"], m["heads"], kv, m["ffn_hidden"], m["vocab"]):
            spec = replace(spec, seq_len=m["seq_len"])
            # NVIDIA's MoE benchmarks force-balance the routing (Megatron-Core --moe-router-force-load-balancing): every
            # expert gets the mean load, as with capacity factor 1.0 (a published setting, not a fitted one)
            if spec.moe and m.get("pad_to_capacity"):
                # Megatron-Bridge apply_moe_token_drop: capacity factor 1.0, each expert's input padded to capacity
                return replace(spec, capacity_factor=1.0, pad_to_capacity=True)
            return replace(spec, capacity_factor=1.0) if spec.moe and m.get("force_balanced_routing") else spec
    return ModelSpec(name=str(m.get("name", "case-model")), layers=m["layers"], hidden=m["hidden"], heads=m["heads"],
                     kv_heads=kv, head_dim=m.get("head_dim") or 0, ffn_hidden=m["ffn_hidden"], vocab=m["vocab"],
                     seq_len=m["seq_len"])


def cluster_of(hw: dict, gpus: int) -> ClusterSpec:
    """The built-in cluster spec of the case's GPU type, sized to the run."""
    for key, name in _GPU_CLUSTERS.items():
        if key in str(hw.get("gpu", "")):
            return load_cluster(name, gpus)
    raise SpecError(f"no cluster spec for GPU {excerpt(hw.get('gpu'))}")


def _known(value: object) -> bool:
    return value is not None and not (isinstance(value, str) and "not stated" in value)


def _recompute(value: object) -> str:
    text = str(value).lower()
    if "modules" in text:
        return "modules"        # Megatron-Core --recompute-modules (norms, MLA up-projections, SwiGLU)
    return "selective" if "selective" in text else "full" if "full" in text else "none"


def precision_of(case: dict) -> str:
    """The run's GEMM precision: ``strategy.precision`` if given, else ``model.dtype`` (an "fp8" run: Transformer
    Engine's tensor-wise delayed scaling, NeMo's default FP8 recipe), else bf16."""
    st, model = case["strategy"], case["model"]
    if _known(st.get("precision")):
        return str(st["precision"])
    return "fp8" if "fp8" in str(model.get("dtype", "")).lower() else "bf16"


def plan_space(case: dict, model: ModelSpec, gpus: int) -> tuple[list[Strategy], tuple[str, ...]]:
    """The published plan, or every plan over the knobs the source left out."""
    st = case["strategy"]
    tp, pp, cp = st.get("tp") or 1, st.get("pp") or 1, st.get("cp") or 1
    dp = st.get("dp") or data_parallel(gpus, tp, pp, cp)
    # Megatron-Core: expert tensor parallelism defaults to the tensor-parallel size
    ep = st.get("ep") or 1
    etp = st.get("etp") or (tp if ep > 1 else 1)
    axes: dict[str, list] = {}
    axes["micro_batch"] = [st["microbatch"]] if _known(st.get("microbatch")) else [1, 2, 4, 8]
    vstages = st.get("virtual_stages_per_rank")
    interleave = st.get("interleaved_schedule")
    if _known(vstages):
        axes["virtual_stages"] = [vstages]
    elif interleave is False or pp == 1:
        axes["virtual_stages"] = [1]
    else:
        # interleaving not stated: 1F1B (v = 1) is as likely as any interleaving, so it is searched too
        axes["virtual_stages"] = ([] if interleave is True else [1]) + [
            v for v in (2, 3, 4, 5, 6, 8, 12) if model.layers % (pp * v) == 0]
    axes["recompute"] = [_recompute(st["recompute"])] if _known(st.get("recompute")) else ["none", "selective", "full"]
    sp = st.get("sequence_parallel")
    axes["sequence_parallel"] = [bool(sp) and tp > 1] if _known(sp) else ([False, True] if tp > 1 else [False])
    dist = st.get("distributed_optimizer")
    axes["zero"] = [0] if not _known(dist) or str(dist).lower().startswith("false") else [1]
    if not _known(dist) and "H100" in str(case.get("hardware", {}).get("gpu", "")):
        axes["zero"] = [0, 1]
    if _known(st.get("zero_stage")):
        axes["zero"] = [int(st["zero_stage"])]      # a ZeRO run (DeepSpeed stage 1-3), as published
    axes["precision"] = [precision_of(case)]
    if axes["precision"] != ["bf16"] and not _known(st.get("fp8_param_gather")):
        axes["fp8_param_gather"] = [False, True]      # FP8 weights (Megatron --fp8-param-gather): not published
    axes["cp_comm"] = [st["cp_comm"]] if _known(st.get("cp_comm")) else ["p2p"]
    # Adam's moments as published (DeepSeek-V3 §3.3.4: BF16), else Megatron-LM's fp32
    axes["optimizer_moments"] = [st["optimizer_moments"]] if _known(st.get("optimizer_moments")) else ["fp32"]
    source = str(case.get("source", "")) + str(case.get("group", ""))
    modern = not any(src in source for src in _SYNCHRONOUS_MEGATRON_SOURCES)
    # software knobs: the file's value, else Strategy's default (the overlaps: the source's Megatron-LM)
    defaults = {f.name: f.default for f in KNOBS if f.metadata["knob"].choices == (False, True) and f.name not in axes}
    defaults |= {"overlap_grad_reduce": modern, "overlap_p2p_comm": modern}
    for knob, default in defaults.items():
        axes[knob] = [bool(st[knob])] if _known(st.get(knob)) else [default]
    if ep > 1 and not _known(st.get("ep_overlap")):
        axes["ep_overlap"] = [False, True]       # the EP all-to-all overlap, when the source does not say
    searched = tuple(k for k, vals in axes.items() if len(vals) > 1)
    # a pipeline schedule the file names (a zero-bubble one: DeepSeek-V3's DualPipe), else Megatron-Core's
    schedule = str(st["schedule"]) if _known(st.get("schedule")) else None
    # uneven first/last stages as published; else the balanced split when the layers do not divide (Megatron-Core;
    # a V shape's rank 0 holds both ends: layout.balanced_v_layout)
    ends = ((balanced_v_layout(model.layers, pp), 0) if schedule in V_SHAPE
            else balanced_layout(model.layers, pp, output_heavy=bool(model.mtp_layers)))
    layout = dict(zip(("first_stage_layers", "last_stage_layers"), ends))
    layout |= {k: int(st[k]) for k in layout if _known(st.get(k))}
    plans = []
    for combo in itertools.product(*axes.values()):
        kw = dict(zip(axes, combo))
        v = kw.pop("virtual_stages")
        plans.append(Strategy(dp=dp, tp=tp, pp=pp, cp=cp, global_batch=st["global_batch"], ep=ep, etp=etp,
                              schedule=schedule or ("interleaved" if v > 1 else "1f1b"), virtual_stages=v, **layout,
                              **kw))
    return [p for p in plans if not family_violations(model, gpus, p)], searched


def run_case(case: dict) -> CaseResult:
    """Predict one published run (iteration time, or hardware TFLOP/s per GPU where that is what was published)."""
    gpus = case["hardware"]["num_gpus"]
    model, cluster = model_of(case["model"]), cluster_of(case["hardware"], gpus)
    measured = case["measured"]
    plans, searched = plan_space(case, model, gpus)
    best = None
    for plan in plans:
        e = evaluate(model, cluster, plan)
        if e.feasible and (best is None or e.metrics.step_time < best.metrics.step_time):
            best = e
    group = group_of(case)
    if "iteration_time_s" in measured or "tokens_per_s_per_gpu" in measured:
        metric = "iteration_time_s"
        if "iteration_time_s" in measured:
            value = float(measured["iteration_time_s"])
        else:
            # a step is global batch × sequence tokens over every GPU's tokens/s
            st = case["strategy"]
            value = st["global_batch"] * case["model"]["seq_len"] / (float(measured["tokens_per_s_per_gpu"]) * gpus)
        predicted = best.metrics.step_time if best else None
    else:
        # SC'21 reports hardware TFLOP/s with eq. 3 (full recompute counted): compare in that convention
        metric, value = "tflops_per_gpu", float(measured["tflops_per_gpu"])
        flops = model.hardware_flops_per_iteration(case["strategy"]["global_batch"], "full")
        predicted = flops / (best.metrics.step_time * gpus) / 1e12 if best else None
    note = "" if best else f"no feasible plan among {len(plans)}"
    return CaseResult(id=case["id"], group=group, metric=metric, measured=value, predicted=predicted,
                      plan=best.strategy if best else None, searched=searched, note=note,
                      known_gap=" ".join(str(case.get("known_gap") or "").split()))


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
    return [CheckResult(id=mc["id"], quantity=k, reference=float(v), predicted=predicted.get(k), unit="GiB")
            for k, v in ref.items()]


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
                       predicted=network.bus_bandwidth(kind, g.size, nbytes, seconds) / 1e9, unit="GB/s")


CNN_METRICS = ("iteration_time_s", "seconds_per_sample")
"""What a CNN case may report: seconds per step, or training seconds per sample on one GPU."""
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
                predicted_of: Callable[[float], float]) -> CaseResult:
    """The case's plan simulated: ``predicted_of(step seconds)`` against the measured ``metric``, or the reasons."""
    measured = float(case["measured"][metric])
    gap = " ".join(str(case.get("known_gap") or "").split())
    reasons = family_violations(model, cluster.gpus, plan)
    if reasons:
        return CaseResult(id=case["id"], group=group, metric=metric, measured=measured, predicted=None, plan=plan,
                          note="; ".join(reasons), known_gap=gap)
    e = evaluate(model, cluster, plan)
    # a run that was measured ran: one the memory model says does not fit is timed anyway, and flagged
    metrics = e.metrics or score(model, cluster, plan)
    return CaseResult(id=case["id"], group=group, metric=metric, measured=measured,
                      predicted=predicted_of(metrics.step_time), plan=plan,
                      note="" if e.feasible else "over the memory model's capacity: " + "; ".join(e.violations),
                      known_gap=gap)


def run_cnn_case(case: dict) -> CaseResult:
    """Predict one CNN run: the case's plan on the case's cluster, the model built at the case's input size."""
    m, hw, st = case["model"], case["hardware"], case["strategy"]
    model = build(str(m["name"]), m["image_size"], m.get("dtype_bytes", 2), str(m.get("framework", "pytorch")))
    cluster = _at_gpus(load_cluster(str(hw.get("cluster", "abci-v100"))), hw["num_gpus"])
    _check_knobs(st, _CNN_KNOBS)
    plan = Strategy(**st)
    metric = next(k for k in CNN_METRICS if k in case["measured"])
    per = plan.global_batch if metric == "seconds_per_sample" else 1
    return _timed_case(case, str(case.get("group", "CNN")), metric, model, cluster, plan, lambda t: t / per)


_DLRM_KNOBS = ("micro_batch", "global_batch", "sharding")
_DLRM_AS_RUN = ("bottom_mlp_placement", "table_placement", "pooled_comm_bytes")
_DLRM_HARDWARE = ("cluster", "num_gpus", "gpu", "hbm_gib", "hbm_bandwidth_gb_per_s")


def dlrm_model(m: dict) -> ModelSpec:
    """The catalog DLRM ``m['name']``, its tables' rows scaled by one factor to ``m['embedding_params']`` if given,
    its bottom MLP, tables and all-to-all as ``m['bottom_mlp_placement']``, ``m['table_placement']`` and
    ``m['pooled_comm_bytes']`` say if given.

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
        gpu = replace(gpu, hbm_bytes=float(hw["hbm_gib"]) * 2**30)
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
                       lambda t: plan.global_batch / t)


def _guarded(run: Callable[..., T], item: dict, what: str, *args: object) -> T:
    """``run(item, *args)``, its errors named by the file's item (a value of a shape the checks did not foresee)."""
    try:
        return run(item, *args)
    except SpecError as err:
        raise SpecError(f"validation file: {what} {str(item.get('id', '?'))[:60]!r}: {err}") from None
    except (KeyError, TypeError, ValueError, AttributeError, StopIteration, ArithmeticError) as err:
        raise SpecError(f"validation file: {what} {str(item.get('id', '?'))[:60]!r} is malformed "
                        f"({type(err).__name__}: {err})") from None


def validate(path: Path | None = None) -> Report:
    """Run every case of the file."""
    data = load(path)
    cases = data["cases"]
    bandwidth = [_guarded(run_bandwidth_case, b, "collective") for b in data.get("collective_bandwidth", [])
                 if "op" in b]
    usable = [b for b in bandwidth if b.note == "" or b.predicted is not None]
    return Report(cases=[_guarded(run_case, c, "case") for c in cases],
                  memory=[r for mc in data.get("memory_cases", []) for r in _guarded(run_memory_case, mc, "memory case",
                                                                                     cases)],
                  bandwidth=usable + [b for b in bandwidth if b not in usable],
                  cnn=[_guarded(run_cnn_case, c, "CNN case") for c in data.get("cnn_cases", [])],
                  dlrm=[_guarded(run_dlrm_case, c, "DLRM case") for c in data.get("dlrm_cases", [])])
