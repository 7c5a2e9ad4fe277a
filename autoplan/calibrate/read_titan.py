"""torchtitan training logs (``step: N  loss: …  memory: …GiB  tps: …  tflops: …  mfu: …%``) with the run's job
config TOML ([model] name/flavor, [training] batch and sequence, [parallelism] degrees, [activation_checkpoint])."""

from __future__ import annotations

import re
import statistics
from dataclasses import replace
from pathlib import Path

from autoplan.calibrate.measurements import Step
from autoplan.calibrate.model import ModelSpec, SpecError, Strategy, get_model

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STEP = re.compile(r"step:\s*(\d+)\s+loss:\s*[-0-9.naninf]+.*?\b(?:tps|wps):\s*([0-9,]+(?:\.\d+)?)")
_MESH = re.compile(r"Building (\d+)-D device mesh with \[([^\]]*)\],\s*\[([0-9,\s]+)\]")
_FLAVORS = {("llama3", "8B"): "llama3-8b", ("llama3", "70B"): "llama3-70b", ("llama3", "405B"): "llama3-405b"}
"""torchtitan model flavors that are catalog models."""


def looks_like_log(text: str) -> bool:
    """A torchtitan log: its step lines."""
    return bool(_STEP.search(_ANSI.sub("", text))) and "loss:" in text and "memory:" in text


def looks_like_config(data: dict) -> bool:
    """A torchtitan job config: [model] with a flavor, and [training] or [parallelism]."""
    return isinstance(data.get("model"), dict) and "flavor" in data["model"] and (
        "training" in data or "parallelism" in data)


def tps(text: str, path: Path) -> tuple[float, int, int, int | None]:
    """(median tokens/s per GPU after warm-up, first line used, lines used, GPUs from the device-mesh line)."""
    found, gpus = [], None
    for no, raw in enumerate(text.splitlines(), 1):
        line = _ANSI.sub("", raw)
        m = _MESH.search(line)
        if m:
            sizes = [int(x) for x in m.group(3).replace(" ", "").split(",") if x]
            prod = 1
            for x in sizes:
                prod *= x
            gpus = prod
        m = _STEP.search(line)
        if m:
            found.append((int(m.group(1)), float(m.group(2).replace(",", "")), no))
    # torchtitan logs every rank; one line per step is enough
    by_step: dict[int, tuple] = {}
    for f in found:
        by_step.setdefault(f[0], f)
    steps = sorted(by_step.values())
    # the first logged step includes compilation and warm-up (torchtitan's own MFU skips it the same way)
    used = [f for f in steps if f[0] > 1] or steps
    if len(used) > 3:
        used = used[1:]
    if not used:
        raise SpecError(f"torchtitan log {str(path)!r}: no 'step: N loss: … tps: …' line")
    if any(not f[1] > 0 for f in used):
        raise SpecError(f"{path}:{used[0][2]}: tps must be positive")
    return statistics.median(f[1] for f in used), used[0][2], len(used), gpus


def _degree(par: dict, key: str, where: str, default: int = 1) -> int:
    v = par.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v == 0 or v < -1:
        raise SpecError(f"{where}: parallelism.{key} must be a positive integer or -1, got {v!r}")
    return v


def _recompute(ac: dict, stage_layers: int, where: str) -> tuple[str, int]:
    """autoplan's recompute and recompute_layers for torchtitan's [activation_checkpoint]: full; selective with
    selective_ac_option "op" (per-op SAC: recompute op) or an integer n (every n-th block wrapped whole:
    parallelize_llama.py _apply_ac_to_transformer_block; recompute full on stage_layers // n of a stage's blocks)."""
    mode = str(ac.get("mode", "selective")).lower()
    if mode == "full":
        return "full", 0
    if mode != "selective":
        return "none", 0
    # job_config.py (TOML configs) default selective_ac_option "2": every second block
    option = str(ac.get("selective_ac_option", "2")).lower()
    if option == "op":
        return "op", 0
    if not option.isdigit() or int(option) == 0:
        raise SpecError(f"{where}: activation_checkpoint.selective_ac_option must be 'op' or a positive integer, "
                        f"got {option!r}")
    wrapped = stage_layers // int(option)
    return ("full", 0 if wrapped >= stage_layers else wrapped) if wrapped else ("none", 0)


def _compiled(config: dict) -> bool:
    """The job compiles its loss: it compiles the model (training.compile or compile.enable) and is of a torchtitan
    that compiles the loss with it. torchtitan turned the loss's compile off on 2024-12-18 (e8977b0, "compiling
    loss function causes CUDA errors") and on again in components/loss.py build_cross_entropy_loss (bbb1b61,
    2025-04-02), before training.local_batch_size replaced batch_size (8570415, 2025-06-05): a batch_size config
    is read as eager."""
    compile_ = config.get("compile", {})
    training = config.get("training", {})
    on = training.get("compile") or (isinstance(compile_, dict) and compile_.get("enable"))
    return bool(on) and "local_batch_size" in training


def parse(log: str, path: Path, config: dict, config_path: Path, model: ModelSpec | None = None,
          gpus: int | None = None) -> Step:
    """One measured step from a torchtitan log and its job config; ``model`` names the model when the config's
    flavor is not a catalog model, ``gpus`` the GPU count when neither the log nor the config gives it."""
    where = str(config_path)
    m = config.get("model", {})
    if model is None:
        name = _FLAVORS.get((str(m.get("name")), str(m.get("flavor"))))
        if name is None:
            raise SpecError(f"{where}: model {m.get('name')!r} flavor {m.get('flavor')!r} is not a catalog model; "
                            "give --model (a catalog name or a HuggingFace config.json)")
        model = get_model(name)
    training = config.get("training", {})
    par = config.get("parallelism", {})
    seq = training.get("seq_len", model.seq_len)
    local = training.get("local_batch_size", training.get("batch_size"))
    for key, value in (("training.seq_len", seq), ("training.local_batch_size", local)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise SpecError(f"{where}: {key} must be a positive integer, got {value!r}")
    model = replace(model, seq_len=seq)
    rate, line, n, mesh_gpus = tps(log, path)
    tp, pp, cp = (_degree(par, k, where) for k in ("tensor_parallel_degree", "pipeline_parallel_degree",
                                                   "context_parallel_degree"))
    rep, shard = _degree(par, "data_parallel_replicate_degree", where), _degree(par, "data_parallel_shard_degree",
                                                                               where, -1)
    world = gpus or mesh_gpus
    if shard == -1:
        if world is None:
            raise SpecError(f"{where}: data_parallel_shard_degree is -1 and the log has no 'Building N-D device mesh' "
                            "line: give the GPU count (--gpus)")
        shard = world // (rep * tp * pp * cp)
    world = world or rep * shard * tp * pp * cp
    if rep * shard * tp * pp * cp != world:
        raise SpecError(f"{where}: replicate·shard·tp·pp·cp = {rep}·{shard}·{tp}·{pp}·{cp} ≠ {world} GPUs")
    dp = rep * shard
    recompute, layers = _recompute(config.get("activation_checkpoint", {}), model.layers // pp, where)
    plan = Strategy(dp=dp, tp=tp, pp=pp, cp=cp, micro_batch=local, global_batch=local * dp,
                    recompute=recompute, recompute_layers=layers, sequence_parallel=tp > 1,
                    zero=3 if shard > 1 else 0, loss_impl="torch-compiled" if _compiled(config) else "torch")
    # torchtitan's tps is tokens per second per GPU (metrics.py: tokens / time / non-data-parallel size)
    seconds = local * dp * seq / (rate * world)
    return Step(name=path.stem, model=model, plans=(plan,), gpus=world, seconds=seconds,
                where=f"{path}:{line} (median of {n} steps)")
