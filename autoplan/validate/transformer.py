"""Transformer runs (``cases``): each mapped to a model, the cluster spec of its hardware and its published plan.

Knobs the source did not publish are searched (only those) and the fastest plan that fits is reported, flagged as
such. Nothing here depends on a case's id: the same rules map every case of a file of this schema.
"""

from __future__ import annotations

import itertools
from dataclasses import fields, replace
from pathlib import Path
from typing import Callable

from autoplan.errors import SpecError
from autoplan.families.catalog import list_models
from autoplan.families.registry import violations as family_violations
from autoplan.families.strategy import KNOBS, Strategy
from autoplan.families.transformer.hf import config_fields, read_config
from autoplan.sim.simulate import evaluate, score
from autoplan.specs.cluster import ClusterSpec, load_cluster
from autoplan.specs.files import excerpt
from autoplan.specs.layout import V_SHAPE, balanced_layout, balanced_v_layout
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import data_parallel
from autoplan.validate.results import CaseResult, gpu_constants

# Megatron-LM of 2021-22 (the SC'21 and 2022 papers' code) all-reduced gradients after the backward pass
# (overlap came with Megatron-Core's DDP in 2023), and its p2p_communication.py waited on every pipeline
# transfer (batch_isend_irecv, req.wait(), torch.cuda.synchronize()): no overlap of either with compute.
_SYNCHRONOUS_MEGATRON_SOURCES = ("2104.04473", "2205.05198")
_GPU_CLUSTERS = {"A100": "dgx-a100-80g", "H100": "dgx-h100-80g", "H800": "dgx-h800-80g", "B200": "dgx-b200"}


def group_of(case: dict) -> str:
    """A short group name from the source: the 2022 paper, the SC'21 table, NVIDIA's recipes."""
    src = str(case.get("group", "")) + str(case.get("source", ""))
    if "2205.05198" in src:
        return "Korthikanti 2022 (A100)"
    if "2104.04473" in src and "Table 2" in src:
        return "SC'21 Table 2, ZeRO-3 vs PTD-P (A100)"
    if "2104.04473" in src:
        return "Megatron SC'21 (A100)"
    recipe = any(name in src for name in _NVIDIA_RECIPES)
    gpu = next((g for g in ("H100", "GB200", "GB300", "B200", "B300")
                if g in str(case.get("hardware", {}).get("gpu", ""))),
               None)
    if recipe and gpu:
        moe = "MoE: " if case.get("model", {}).get("experts") else ""
        group = str(case.get("group", ""))
        stack = ", NeMo 2.0" if "(NeMo 2.0)" in group else ", Megatron-Bridge" if "Megatron-Bridge" in group else ""
        return f"{moe}NVIDIA {gpu} recipes{stack}" + (", FP8" if precision_of(case) != "bf16" else "")
    return str(case.get("group", "other"))


_NVIDIA_RECIPES = ("NVIDIA DGX Cloud benchmarking", "Megatron-Bridge performance summary")
"""Sources of NVIDIA's published H100 recipe runs, grouped by precision and by dense or MoE."""


def model_of(m: dict, where: Path | None = None) -> ModelSpec:
    """The run's model: the catalog model of the same shape (seq_len as run), else a GPT-style model of that shape;
    then every ModelSpec field the file gives inline (``activation``, ``kv_heads``, ``tied_embeddings``, MoE counts,
    …) or an ``hf_config`` (a HuggingFace config.json's fields, or a path to one relative to the file)."""
    base = _catalog_match(m) or _gpt_style(m)
    inline = dict(_hf_fields(m["hf_config"], where)) if m.get("hf_config") is not None else {}
    inline |= {k: m[k] for k in _INLINE if k in m and m[k] is not None}
    if not inline:
        return base
    if "experts" in inline and inline["experts"] and base.family == "dense":
        inline.setdefault("family", "moe")
    if m.get("force_balanced_routing") and inline.get("experts"):
        inline.setdefault("capacity_factor", 1.0)      # as _catalog_match: every expert gets the mean load
    try:
        return replace(base, name=str(m.get("name", base.name)), **inline)
    except (TypeError, SpecError) as err:
        raise SpecError(f"model: {err}") from None


_INLINE = tuple(f.name for f in fields(ModelSpec) if f.name not in ("name", "source", "structure", "family"))
"""ModelSpec fields a validation file may give inline for a run's model."""


def _hf_fields(config: object, where: Path | None) -> dict:
    """ModelSpec fields of an inline HuggingFace config (a mapping) or of the config.json a path names."""
    if isinstance(config, dict):
        return config_fields(config, "hf_config")
    path = Path(str(config))
    if not path.is_absolute() and where is not None:
        path = where.parent / path
    return config_fields(read_config(path), path)


def _catalog_match(m: dict) -> ModelSpec | None:
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
    return None


def _gpt_style(m: dict) -> ModelSpec:
    return ModelSpec(name=str(m.get("name", "case-model")), layers=m["layers"], hidden=m["hidden"], heads=m["heads"],
                     kv_heads=m.get("kv_heads") or m["heads"], head_dim=m.get("head_dim") or 0,
                     ffn_hidden=m["ffn_hidden"], vocab=m["vocab"], seq_len=m["seq_len"])


def cluster_of(hw: dict, gpus: int) -> ClusterSpec:
    """The run's cluster spec (``hardware.cluster_spec``, else the built-in spec of its GPU type) sized to the run,
    with ``hardware.flash_attention``, ``hardware.attention_kernel`` and ``hardware.nccl_algo`` as the run's software
    had them and ``hardware.hbm_gib`` (usable GiB) where the run's GPU holds more or less memory than the spec's (a
    96 GB H100 beside the 80 GB spec)."""
    name = hw.get("cluster_spec") or next((n for key, n in _GPU_CLUSTERS.items() if key in str(hw.get("gpu", ""))),
                                          None)
    if name is None:
        raise SpecError(f"no cluster spec for GPU {excerpt(hw.get('gpu'))} (give hardware.cluster_spec)")
    base = load_cluster(str(name))
    cluster = (base.with_gpus(gpus) if gpus >= base.gpus_per_node
               else replace(base, gpus_per_node=gpus, nodes=1))       # one node holding only the run's GPUs
    if "flash_attention" in hw:
        if not isinstance(hw["flash_attention"], bool):
            raise SpecError(f"hardware.flash_attention must be true or false, got {hw['flash_attention']!r}")
        cluster = replace(cluster, flash_attention=hw["flash_attention"])
    if "hbm_gib" in hw:
        cluster = replace(cluster, gpu=replace(cluster.gpu, hbm_bytes=hbm_bytes_of(hw)))
    if not nvls_of(hw):
        cluster = cluster.without_nvls()
    kernel = attention_kernel_of(hw)
    if kernel.startswith("flash2"):
        cluster = replace(cluster, gpu=cluster.gpu.with_flash2_attention(kernel == "flash2-deterministic"))
    elif kernel == "fused-deterministic":
        cluster = replace(cluster, gpu=cluster.gpu.with_deterministic_attention())
    return cluster


ATTENTION_KERNELS = ("fused", "fused-deterministic", "flash2", "flash2-deterministic")
"""A run's attention kernel: the fused kernel the cluster spec's ``attention_efficiency`` describes (cuDNN's on
Hopper and later), FlashAttention-2 (``GPUSpec.flash2_attention_efficiency``; Transformer Engine with
NVTE_FUSED_ATTN=0 and flash-attn installed), each with its deterministic backward (``GPUSpec
.fused_deterministic_bwd_ratio``, ``flash2_deterministic_bwd_ratio``): Transformer Engine under
NVTE_ALLOW_NONDETERMINISTIC_ALGO=0 keeps its fused attention from sm90 up and runs FlashAttention-2 below (v1.13
attention.py "Filter: Determinism")."""


def attention_kernel_of(hw: dict) -> str:
    """``hardware.attention_kernel`` of a run, one of ``ATTENTION_KERNELS`` (SpecError otherwise); fused if absent."""
    kernel = hw.get("attention_kernel", "fused")
    if kernel not in ATTENTION_KERNELS:
        raise SpecError(f"hardware.attention_kernel must be one of {', '.join(ATTENTION_KERNELS)}, "
                        f"got {excerpt(kernel)}")
    return kernel


NCCL_ALGOS = ("Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT")
"""The algorithms NCCL_ALGO may name (NCCL environment variables documentation)."""


def nccl_algos_of(hw: dict) -> tuple[str, ...]:
    """The algorithms a run's NCCL may use (``hardware.nccl_algo``, its NCCL_ALGO: comma-separated names, or
    ``^``-prefixed ones it may not use), all of ``NCCL_ALGOS`` if absent."""
    text = str(hw.get("nccl_algo", "^"))
    exclude = text.startswith("^")
    names = tuple(a.strip() for a in text.removeprefix("^").split(",") if a.strip())
    unknown = [a for a in names if a not in NCCL_ALGOS]
    if unknown:
        raise SpecError(f"hardware.nccl_algo: unknown NCCL algorithm {excerpt(unknown[0])} "
                        f"(one or more of {', '.join(NCCL_ALGOS)}, comma-separated, or ^ and those it may not use)")
    return tuple(a for a in NCCL_ALGOS if a not in names) if exclude else names


def nvls_of(hw: dict) -> bool:
    """Whether a run's NCCL may all-reduce by NVLink SHARP (NCCL_ALGO unset, naming it or not excluding it)."""
    return "NVLS" in nccl_algos_of(hw)


def hbm_bytes_of(hw: dict) -> float:
    """``hardware.hbm_gib`` of a run, in bytes (SpecError unless a number of GiB from 1 to 10,000)."""
    gib = hw["hbm_gib"]
    if isinstance(gib, bool) or not isinstance(gib, (int, float)) or not 1 <= gib <= 1e4:
        raise SpecError(f"hardware.hbm_gib must be a number of GiB (1 to 10,000), got {gib!r}")
    return float(gib) * 2**30


def _known(value: object) -> bool:
    return value is not None and not (isinstance(value, str) and "not stated" in value)


def _recompute(value: object) -> str:
    text = str(value).lower()
    if text.split()[:1] == ["op"]:
        return "op"             # torchtitan's per-op selective checkpointing (selective_ac_option "op")
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


def needs_of(run: dict) -> tuple[str, ...]:
    """The settings a run used that autoplan cannot describe (its file's ``needs`` list)."""
    needs = run.get("needs") or []
    if not isinstance(needs, list) or not all(isinstance(x, str) for x in needs):
        raise SpecError(f"needs must be a list of setting names, got {excerpt(needs)}")
    return tuple(needs)


def plan_space(case: dict, model: ModelSpec, gpus: int) -> tuple[list[Strategy], tuple[str, ...]]:
    """The published plan, or every plan over the knobs the source left out."""
    st = case["strategy"]
    tp, pp, cp = st.get("tp") or 1, st.get("pp") or 1, st.get("cp") or 1
    dp = st.get("dp") or data_parallel(gpus, tp, pp, cp)
    # Megatron-Core: expert tensor parallelism defaults to the tensor-parallel size
    ep = st.get("ep") or 1
    etp = st.get("etp") or (tp if ep > 1 else 1)
    axes = _axes(case, model, tp, pp, ep)
    searched = tuple(k for k, vals in axes.items() if len(vals) > 1)
    # a pipeline schedule the file names (a zero-bubble one: DeepSeek-V3's DualPipe), else Megatron-Core's
    schedule = str(st["schedule"]) if _known(st.get("schedule")) else None
    layout = _layout(st, model, pp, schedule)
    plans = []
    for combo in itertools.product(*axes.values()):
        kw = dict(zip(axes, combo))
        v = kw.pop("virtual_stages")
        plans.append(Strategy(dp=dp, tp=tp, pp=pp, cp=cp, global_batch=st["global_batch"], ep=ep, etp=etp,
                              schedule=schedule or ("interleaved" if v > 1 else "1f1b"), virtual_stages=v, **layout,
                              **kw))
    return [p for p in plans if not family_violations(model, gpus, p)], searched


def _axes(case: dict, model: ModelSpec, tp: int, pp: int, ep: int) -> dict[str, list]:
    """Each plan field's values: the one the source states, else every value it could have been."""
    st = case["strategy"]
    axes: dict[str, list] = {}
    axes["micro_batch"] = [st["microbatch"]] if _known(st.get("microbatch")) else [1, 2, 4, 8]
    axes["virtual_stages"] = _virtual_stages(st, model, pp)
    axes["recompute"] = [_recompute(st["recompute"])] if _known(st.get("recompute")) else ["none", "selective", "full"]
    sp = st.get("sequence_parallel")
    axes["sequence_parallel"] = [bool(sp) and tp > 1] if _known(sp) else ([False, True] if tp > 1 else [False])
    axes["zero"] = _zero_stages(case)
    axes["precision"] = [precision_of(case)]
    if axes["precision"] != ["bf16"] and not _known(st.get("fp8_param_gather")):
        axes["fp8_param_gather"] = [False, True]      # FP8 weights (Megatron --fp8-param-gather): not published
    if not _known(st.get("grad_reduce_in_fp32")):
        # the gradient buffer's type differs by framework (Megatron-LM forces fp32 under bf16, arguments.py; NeMo's
        # distributed_fused_adam keeps grad_sync_dtype, Megatron-Core's DDP grad_reduce_in_fp32): not published
        axes["grad_reduce_in_fp32"] = [True, False]
    axes["cp_comm"] = [st["cp_comm"]] if _known(st.get("cp_comm")) else ["p2p"]
    axes["loss_impl"] = [st["loss_impl"]] if _known(st.get("loss_impl")) else ["megatron"]
    # Adam's moments as published (DeepSeek-V3 §3.3.4: BF16), else Megatron-LM's fp32
    axes["optimizer_moments"] = [st["optimizer_moments"]] if _known(st.get("optimizer_moments")) else ["fp32"]
    source = str(case.get("source", "")) + str(case.get("group", ""))
    modern = not any(src in source for src in _SYNCHRONOUS_MEGATRON_SOURCES)
    # software knobs: the file's value, else Strategy's default (the overlaps: the source's Megatron-LM)
    defaults = {f.name: f.default for f in KNOBS if f.metadata["knob"].choices == (False, True) and f.name not in axes}
    defaults |= {"overlap_grad_reduce": modern, "overlap_p2p_comm": modern}
    for knob, default in defaults.items():
        axes[knob] = [bool(st[knob])] if _known(st.get(knob)) else [default]
    for knob in _STATED_ONLY:
        if _known(st.get(knob)):
            axes[knob] = [st[knob]]
    if ep > 1 and not _known(st.get("ep_overlap")):
        axes["ep_overlap"] = [False, True]       # the EP all-to-all overlap, when the source does not say
    return axes


_STATED_ONLY = ("recompute_layers", "activation_offload_layers", "optimizer_offload_pct", "collective_policy",
                "tp_overlap_rs", "moe_dispatcher")
"""Knobs a run takes when its file states them, Strategy's default otherwise (never searched)."""


def _virtual_stages(st: dict, model: ModelSpec, pp: int) -> list[int]:
    """Virtual stages a rank holds: as stated, 1 without interleaving, else every interleaving the layers allow."""
    vstages, interleave = st.get("virtual_stages_per_rank"), st.get("interleaved_schedule")
    if _known(vstages):
        return [vstages]
    if interleave is False or pp == 1:
        return [1]
    # interleaving not stated: 1F1B (v = 1) is as likely as any interleaving, so it is searched too
    return ([] if interleave is True else [1]) + [v for v in (2, 3, 4, 5, 6, 8, 12) if model.layers % (pp * v) == 0]


def _zero_stages(case: dict) -> list[int]:
    """ZeRO stages: a published DeepSpeed stage, 1 under a distributed optimizer, both when an H100 run's source
    does not say, else 0."""
    st = case["strategy"]
    if _known(st.get("zero_stage")):
        return [int(st["zero_stage"])]           # a ZeRO run (DeepSpeed stage 1-3), as published
    dist = st.get("distributed_optimizer")
    if not _known(dist) and "H100" in str(case.get("hardware", {}).get("gpu", "")):
        return [0, 1]
    return [0] if not _known(dist) or str(dist).lower().startswith("false") else [1]


def _layout(st: dict, model: ModelSpec, pp: int, schedule: str | None) -> dict[str, int]:
    """The end stages' layer counts (and the deferred output-layer weight gradients) the plan takes."""
    # uneven first/last stages as published; else the balanced split when the layers do not divide (Megatron-Core;
    # a V shape's rank 0 holds both ends: layout.balanced_v_layout)
    ends = ((balanced_v_layout(model.layers, pp), 0) if schedule in V_SHAPE
            else balanced_layout(model.layers, pp, output_heavy=bool(model.mtp_layers)))
    layout = dict(zip(("first_stage_layers", "last_stage_layers"), ends))
    # and the counts the file states (the end stages' layers, the deferred output-layer weight gradients)
    return layout | {k: int(st[k]) for k in (*layout, "embedding_wgrad_deferral") if _known(st.get(k))}


def run_variants(case: dict, where: Path | None = None) -> list[CaseResult]:
    """The case read each other way its file gives (``variants``: a label and strategy keys that replace the
    case's), each shown beside the case and never counted."""
    out = []
    for v in case.get("variants") or []:
        if not isinstance(v, dict) or not isinstance(v.get("strategy"), dict) or not v.get("label"):
            raise SpecError("variants must be a list of {label, strategy} mappings")
        st = {k: x for k, x in {**case["strategy"], **v["strategy"]}.items() if x is not None}
        row = run_case({**case, "strategy": st, "calibration": ""}, where)
        out.append(replace(row, id=f"{case['id']} [{v['label']}]", variant_of=case["id"]))
    return out


def run_case(case: dict, where: Path | None = None) -> CaseResult:
    """Predict one published run (iteration time, or hardware TFLOP/s per GPU where that is what was published)."""
    gpus = case["hardware"]["num_gpus"]
    model, cluster = model_of(case["model"], where), cluster_of(case["hardware"], gpus)
    measured = case["measured"]
    plans, searched = plan_space(case, model, gpus)
    best, closest = None, None
    for plan in plans:
        e = evaluate(model, cluster, plan)
        if e.feasible and (best is None or e.metrics.step_time < best.metrics.step_time):
            best = e
        elif e.metrics is None and e.peak_memory and (closest is None or e.peak_memory < closest.peak_memory):
            closest = e
    fits = best is not None
    if best is None and closest is not None:
        # the run ran, so it fitted: time the plan the memory model finds closest to fitting, flagged, and count it
        best = replace(closest, metrics=score(model, cluster, closest.strategy))
    if "iteration_time_s" in measured or "tokens_per_s_per_gpu" in measured:
        metric = "iteration_time_s"
        if "iteration_time_s" in measured:
            value = float(measured["iteration_time_s"])
        else:
            # a step is global batch × sequence tokens over every GPU's tokens/s
            st = case["strategy"]
            value = st["global_batch"] * case["model"]["seq_len"] / (float(measured["tokens_per_s_per_gpu"]) * gpus)

        def convert(step: float) -> float:
            return step
    else:
        # SC'21 reports hardware TFLOP/s with eq. 3 (full recompute counted): compare in that convention
        metric, value = "tflops_per_gpu", float(measured["tflops_per_gpu"])
        flops = model.hardware_flops_per_iteration(case["strategy"]["global_batch"], "full")

        def convert(step: float) -> float:
            return flops / (step * gpus) / 1e12
    gib = 1024**3
    note = ("" if fits else f"predicted NOT to fit: {best.peak_memory / gib:.1f} of {cluster.gpu.hbm_bytes / gib:.1f} GiB"
            if best else f"no valid plan among {len(plans)}")
    rerun = None
    if best is not None:
        plan = best.strategy

        def rerun(change: Callable[[ClusterSpec], ClusterSpec]) -> float:
            return convert(score(model, change(cluster), plan).step_time)
    return CaseResult(id=case["id"], group=group_of(case), metric=metric, measured=value,
                      predicted=convert(best.metrics.step_time) if best else None,
                      plan=best.strategy if best else None, gpu=cluster.gpu.name,
                      constants=gpu_constants(cluster.gpu), searched=searched, note=note,
                      known_gap=" ".join(str(case.get("known_gap") or "").split()),
                      calibration=str(case.get("calibration") or ""), rerun=rerun, fits=fits,
                      needs=needs_of(case))
