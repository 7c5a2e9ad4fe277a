"""Launch settings for a plan in a format, and best_plan.json: each model family declares the frameworks that
launch its plans (``Family.launchers``: Megatron-LM, torchtitan and DeepSpeed for transformers, PyTorch DDP for
CNNs, TorchRec for DLRMs); the texts come from each family's ``export.py``."""

from __future__ import annotations

import json
from typing import Any

from autoplan.errors import SpecError
from autoplan.families.registry import launch_with, launcher, launchers
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.export import TRANSFORMER_LAUNCHERS as TRANSFORMER
from autoplan.families.transformer.export import megatron_args, megatron_notes, megatron_text
from autoplan.report.serialize import metrics_dict
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec

FORMATS = ("megatron", "torchtitan", "deepspeed", "pytorch", "torchrec")
"""Every export format some family declares (``autoplan export --format``)."""


def formats(model: ModelSpec | None) -> tuple[str, ...]:
    """The formats of ``model``'s family, its default first (a model that could not be rebuilt: the transformers')."""
    return tuple(x.name for x in (launchers(model) if model is not None else TRANSFORMER))


def export_text(fmt: str | None, s: Strategy, model: ModelSpec | None, cluster: ClusterSpec | None = None,
                header: str = "") -> str:
    """The plan in format ``fmt`` (None: the family's default); SpecError when that framework cannot launch it or
    does not launch the model's family."""
    if fmt is not None and fmt not in FORMATS:
        raise SpecError(f"unknown export format {fmt!r}; formats are {', '.join(FORMATS)}")
    if model is None:
        if fmt not in (None, "megatron"):
            raise SpecError(f"--format {fmt} needs the run's model, which could not be rebuilt")
        flash = cluster.flash_attention if cluster is not None else True
        return megatron_text(s, None, flash, header, cluster.gpus_per_node if cluster is not None else None)
    chosen = launcher(model, fmt or formats(model)[0])
    return chosen.text(s, model, cluster, header)


def launch_section(s: Strategy, model: ModelSpec | None, cluster: ClusterSpec | None) -> tuple[str, str]:
    """(framework title, launch text) of the first of the family's frameworks that launches ``s`` as planned;
    SpecError saying why none does."""
    if model is None:
        return "Megatron-LM", export_text(None, s, None, cluster)
    reasons = []
    for x in launchers(model):
        found = x.violations(model, s)
        if not found:
            return x.title, x.text(s, model, cluster, "")
        reasons.append(f"{x.title}: {'; '.join(found)}")
    raise SpecError("no framework launches this plan as planned (" + " | ".join(reasons) + ")")


def best_plan(e: Any, model: ModelSpec | None, cluster: ClusterSpec | None = None) -> dict:
    """best_plan.json: the plan's fields, its metrics, the frameworks that launch it and each format's launch (or
    why that framework cannot launch it)."""
    s = e.strategy
    out: dict = {"plan": s.short(), "strategy": s.to_dict(), "metrics": metrics_dict(e.metrics)}
    if model is not None:
        out["launch_with"] = launch_with(model, s)
    if model is None or model.family in ("dense", "moe"):
        flash = cluster.flash_attention if cluster is not None else True
        out["megatron"] = {"args": megatron_args(s, model, flash), "notes": megatron_notes(s, model)}
    for fmt in formats(model):
        try:
            out[fmt if fmt != "megatron" else "megatron_launch"] = export_text(fmt, s, model, cluster)
        except SpecError as err:
            out[fmt if fmt != "megatron" else "megatron_launch"] = {"cannot": str(err)}
    return out


def best_plan_json(e: Any, model: ModelSpec | None, cluster: ClusterSpec | None = None) -> str:
    """best_plan.json's text."""
    return json.dumps(best_plan(e, model, cluster), indent=2)
