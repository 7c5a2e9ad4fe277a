"""Measured training steps from a validation file (``autoplan validate``'s schema, e.g. ``public.yaml``): each case
mapped to its model and plans exactly as ``autoplan validate`` maps it, kept if it ran on the calibrated GPU."""

from __future__ import annotations

from pathlib import Path


from autoplan.calibrate.measurements import Step
from autoplan.calibrate.model import ClusterSpec, SpecError, Strategy, validation


def looks_like(text: str) -> bool:
    """A validation file: a YAML mapping with a ``cases`` list."""
    return "cases:" in text and ("measured:" in text or "cnn_cases:" in text or "dlrm_cases:" in text)


def _line_of(text: str, case_id: str) -> int:
    for no, line in enumerate(text.splitlines(), 1):
        if case_id and f"id: {case_id}" in line:
            return no
    return 0


def _ran_on(hw: dict, base: ClusterSpec, default_cluster: str | None) -> bool:
    """The case ran on the base cluster's GPU: its cluster by name, or its GPU type in the base GPU's name."""
    if default_cluster is not None:
        return str(hw.get("cluster", default_cluster)) == base.name
    gpu = str(hw.get("gpu", ""))
    return any(key in gpu and (key in base.gpu.name or name == base.name)
               for key, name in validation.transformer._GPU_CLUSTERS.items())


def _transformer(case: dict) -> tuple:
    gpus = case["hardware"]["num_gpus"]
    model = validation.model_of(case["model"])
    plans, _ = validation.plan_space(case, model, gpus)
    measured, st = case["measured"], case["strategy"]
    if "iteration_time_s" in measured:
        seconds = float(measured["iteration_time_s"])
    elif "tokens_per_s_per_gpu" in measured:
        seconds = st["global_batch"] * case["model"]["seq_len"] / (float(measured["tokens_per_s_per_gpu"]) * gpus)
    else:
        # SC'21's hardware TFLOP/s (eq. 3, full recompute counted) back to seconds, as `validate` compares them
        flops = model.hardware_flops_per_iteration(st["global_batch"], "full")
        seconds = flops / (float(measured["tflops_per_gpu"]) * 1e12 * gpus)
    hw = case["hardware"]
    # the run's memory and attention as validate reads them (validate.transformer.cluster_of)
    over = (("hbm_bytes", validation.transformer.hbm_bytes_of(hw)),) if "hbm_gib" in hw else ()
    kernels = {"flash_attention": hw["flash_attention"]} if isinstance(hw.get("flash_attention"), bool) else {}
    kernel = validation.transformer.attention_kernel_of(hw)
    kernels |= {"flash2_attention": kernel.startswith("flash2"),
                "deterministic_attention": kernel.endswith("-deterministic"),
                "nvls": validation.transformer.nvls_of(hw)}
    return model, tuple(plans), gpus, seconds, over, validation.group_of(case), kernels


def _cnn(case: dict) -> tuple:
    m, hw, st = case["model"], case["hardware"], case["strategy"]
    model = validation.others.build(str(m["name"]), m["image_size"], m.get("dtype_bytes", 2), str(m.get("framework",
                                                                                                   "pytorch")))
    validation.others._check_knobs(st, validation.others._CNN_KNOBS)
    plan = Strategy(**st)
    metric = next(k for k in validation.files.CNN_METRICS if k in case["measured"])
    per = plan.global_batch if metric == "seconds_per_sample" else 1
    return model, (plan,), hw["num_gpus"], float(case["measured"][metric]) * per, (), str(case.get("group", "CNN")), {}


def _dlrm(case: dict) -> tuple:
    m, hw, st = case["model"], case["hardware"], case["strategy"]
    model = validation.dlrm_model(m)
    validation.others._check_knobs(st, validation.others._DLRM_KNOBS)
    gpus = hw["num_gpus"]
    plan = Strategy(dp=gpus, **{"micro_batch": st["global_batch"] // gpus, **st})
    over = []
    if hw.get("hbm_gib"):
        over.append(("hbm_bytes", validation.transformer.hbm_bytes_of(hw)))
    if hw.get("hbm_bandwidth_gb_per_s"):
        over.append(("hbm_bandwidth", float(hw["hbm_bandwidth_gb_per_s"]) * 1e9))
    return (model, (plan,), gpus, plan.global_batch / float(case["measured"]["samples_per_s"]), tuple(over),
            str(case.get("group", "DLRM")), {})


def parse(text: str, path: Path, base: ClusterSpec, known_gaps: bool = False) -> tuple[list[Step], list[str]]:
    """The file's runs on the base cluster's GPU as steps, and notes on what was left out."""
    data = validation.load(path)
    steps, notes, other, gaps = [], [], 0, 0
    kinds = (("cases", None, _transformer), ("cnn_cases", "abci-v100", _cnn), ("dlrm_cases", "dgx-a100-80g", _dlrm))
    for key, default_cluster, build in kinds:
        for case in data.get(key, []):
            if not _ran_on(case.get("hardware", {}), base, default_cluster):
                other += 1
                continue
            if case.get("known_gap") and not known_gaps:
                gaps += 1
                continue
            where = f"{path}:{_line_of(text, str(case.get('id', '')))}"
            try:
                model, plans, gpus, seconds, over, group, kernels = build(case)
            except SpecError as err:
                raise SpecError(f"{where}: case {str(case.get('id'))[:60]!r}: {err}") from None
            except (KeyError, TypeError, ValueError, StopIteration, ArithmeticError) as err:
                raise SpecError(f"{where}: case {str(case.get('id'))[:60]!r} is malformed "
                                f"({type(err).__name__}: {err})") from None
            if not plans:
                raise SpecError(f"{where}: case {str(case.get('id'))[:60]!r} has no valid plan")
            steps.append(Step(name=str(case.get("id")), model=model, plans=plans, gpus=gpus, seconds=seconds,
                              where=where, gpu_overrides=over, group=group, **kernels))
    if other:
        notes.append(f"{path}: {other} runs on other hardware than {base.gpu.name} left out")
    if gaps:
        notes.append(f"{path}: {gaps} runs marked known_gap left out (the model does not cover them yet)")
    return steps, notes
