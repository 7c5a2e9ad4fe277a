"""What a run folder holds, checked as strictly as the user's own files: a run folder is user input (copied,
edited, damaged), so ``inputs.json``, ``specs.json`` and every record of ``evaluations.jsonl`` are refused with one
line naming the file and the field, never trusted into a crash later (an IndexError for a top of 0, an
OverflowError for an infinite throughput, a negative step time ranked first).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from autoplan.errors import SpecError
from autoplan.families.strategy import AXES, Strategy
from autoplan.specs.cluster import MAX_GPUS, ClusterSpec
from autoplan.specs.files import excerpt
from autoplan.specs.model import MAX_SIZE, ModelSpec

if TYPE_CHECKING:                                   # the simulator loads only when a record is checked
    from autoplan.sim.simulate import Evaluation

SAMPLERS = ("exhaustive", "tpe", "nsga2", "random", "symbolic")
"""Samplers a run records (``auto`` is recorded as the one it chose; ``symbolic`` for ``--cost symbolic``)."""
MAX_BUDGET = 10**7
"""Largest --budget: ten million distinct plans, days of simulation; a larger one is a typo."""
MAX_TOP = 1000
INTEGERS = {"gpus": (1, MAX_GPUS), "global_batch": (1, MAX_SIZE), "top": (1, MAX_TOP), "budget": (1, MAX_BUDGET)}
"""inputs.json's integers and their ranges (those of the search flags); the seed is any integer."""
NAMES = ("model", "cluster", "gpu", "study")
CHOICES = {"sampler": SAMPLERS, "cost": ("sim", "symbolic"), "symbolic_weights": ("shape", "balance", "launch")}


def check_inputs(data: Any, where: str) -> dict:
    """``data`` (inputs.json) if every field it has is of the right type and in range; its space's axes are
    checked as a space file's. SpecError naming ``where`` and the field otherwise. Missing fields are left to the
    caller (a resume needs all of the search settings; ``show`` makes do with fewer)."""
    from autoplan.search.space import space_from_axes

    if not isinstance(data, dict):
        raise SpecError(f"{where} must hold a JSON object, not {type(data).__name__}")
    for key, (low, high) in INTEGERS.items():
        if key in data and (type(data[key]) is not int or not low <= data[key] <= high):
            raise SpecError(f"{where}: {key} must be an integer in [{low:,}, {high:,}], got {excerpt(data[key])}")
    if "seed" in data and type(data["seed"]) is not int:
        raise SpecError(f"{where}: seed must be an integer, got {excerpt(data['seed'])}")
    for key in NAMES:
        value = data.get(key, "x")
        if not isinstance(value, str) or not value or len(value) > 200 or not value.isprintable():
            raise SpecError(f"{where}: {key} must be a name of at most 200 printable characters, got {excerpt(value)}")
    for key, allowed in CHOICES.items():
        if key in data and (not isinstance(data[key], str) or data[key] not in allowed):
            raise SpecError(f"{where}: {key} must be one of {', '.join(allowed)}, got {excerpt(data[key])}")
    prefilter = data.get("prefilter")
    if prefilter is not None and (type(prefilter) not in (int, float) or not math.isfinite(prefilter)
                                  or not 0 < prefilter <= 100):
        raise SpecError(f"{where}: prefilter must be a percentage in (0, 100], got {excerpt(prefilter)}")
    if "interrupted" in data and type(data["interrupted"]) is not bool:
        raise SpecError(f"{where}: interrupted must be true or false, got {excerpt(data['interrupted'])}")
    if "space" in data:
        if not isinstance(data["space"], dict):
            raise SpecError(f"{where}: space must be an object of axes, got {excerpt(data['space'])}")
        space_from_axes(data["space"], f"{where}: space")
    return data


def check_specs(model: ModelSpec, cluster: ClusterSpec, where: str, gpus: int | None = None) -> None:
    """The model and cluster a run folder keeps, through the checks of a model and a cluster file: a model its
    family can cost, a cluster with plausible numbers and a network; ``gpus`` (the run's) filling its nodes."""
    from autoplan.families.catalog import check_model
    from autoplan.specs.cluster import check_cluster

    try:
        check_model(model)
    except SpecError as err:
        raise SpecError(f"{where}: {err}") from None
    check_cluster(cluster, f"{where}: cluster")
    if gpus is not None and cluster.gpus != gpus:
        raise SpecError(f"{where}: the cluster has {cluster.nodes} nodes of {cluster.gpus_per_node} GPUs, not the "
                        f"run's {gpus} GPUs")


def _numbers(value: Any, path: str) -> list[tuple[str, float]]:
    """Every number inside ``value`` (a dataclass, dict or sequence of them) with its dotted path."""
    import dataclasses

    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [(path, value)]
    if dataclasses.is_dataclass(value):
        return [x for f in dataclasses.fields(value) for x in _numbers(getattr(value, f.name), f"{path}.{f.name}")]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _numbers(v, f"{path}.{k}")]
    if isinstance(value, (list, tuple)):
        return [x for i, v in enumerate(value) for x in _numbers(v, f"{path}[{i}]")]
    return []


POSITIVE = ("step_time", "memory_capacity")
NON_NEGATIVE = ("tokens_per_s", "samples_per_s", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu", "hfu",
                "peak_memory")


def check_evaluation(e: Evaluation, inputs: dict | None) -> None:
    """A recorded evaluation: finite figures (a positive step time; throughput, utilisation and memory not
    negative), and a plan of the run's space (``inputs``: its axes, GPU count and global batch)."""
    if type(e.peak_memory) is not float or not math.isfinite(e.peak_memory) or e.peak_memory < 0:
        raise SpecError(f"peak_memory must be a finite number ≥ 0, got {excerpt(e.peak_memory)}")
    m = e.metrics
    if m is not None:
        for path, value in _numbers(m, "metrics"):
            if not math.isfinite(value):
                raise SpecError(f"{path} must be a finite number, got {excerpt(value)}")
        for name in POSITIVE + NON_NEGATIVE:
            value = getattr(m, name)
            if value < 0 or (name in POSITIVE and value == 0):
                raise SpecError(f"metrics.{name} must be {'> 0' if name in POSITIVE else '≥ 0'}, got {value!r}")
    if inputs:
        check_plan(e.strategy, inputs)


def check_plan(s: Strategy, inputs: dict) -> None:
    """``s`` belongs to the run's space: each axis takes one of the space's values (virtual stages: 1 except on
    the interleaved schedule), its degrees multiply to the run's GPUs, its global batch is the run's (one of its
    range's)."""
    space = inputs.get("space") or {}
    for axis in AXES:
        value, allowed = getattr(s, axis), space.get(axis)
        if axis == "virtual_stages" and s.schedule != "interleaved":
            allowed = [1]
        if allowed is not None and not any(type(value) is type(a) and value == a for a in allowed):
            raise SpecError(f"strategy.{axis} {excerpt(value)} is not in the run's space ({excerpt(allowed)})")
    if "gpus" in inputs and s.gpus != inputs["gpus"]:
        raise SpecError(f"strategy occupies {s.gpus} GPUs, not the run's {inputs['gpus']}")
    batches = space.get("global_batch") or ([inputs["global_batch"]] if "global_batch" in inputs else None)
    if batches is not None and s.global_batch not in batches:       # a --global-batch range is a space axis
        raise SpecError(f"strategy.global_batch {s.global_batch} is not the run's {excerpt(batches)}")
