"""Launch settings for a plan in a format (Megatron-LM, torchtitan, PyTorch DDP), and best_plan.json; the
texts come from each family's ``export.py``."""

from __future__ import annotations

import json
from typing import Any

from autoplan.errors import SpecError
from autoplan.families.cnn.export import pytorch_text
from autoplan.families.dlrm.spec import dlrm_of
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.export import megatron_args, megatron_notes, megatron_text, torchtitan_toml
from autoplan.report.serialize import metrics_dict
from autoplan.specs.model import ModelSpec

FORMATS = ("megatron", "torchtitan", "pytorch")


def export_text(fmt: str, s: Strategy, model: ModelSpec | None, flash_attention: bool = True,
                header: str = "") -> str:
    """The plan in format ``fmt`` (megatron or torchtitan)."""
    if fmt == "megatron":
        return megatron_text(s, model, flash_attention, header)
    if fmt == "torchtitan":
        return torchtitan_toml(s, model, header)
    if fmt == "pytorch":
        return pytorch_text(s, model, header)
    raise SpecError(f"unknown export format {fmt!r}; formats are {', '.join(FORMATS)}")


def best_plan(e: Any, model: ModelSpec | None, flash_attention: bool = True) -> dict:
    """best_plan.json: the plan's fields, its metrics and its launch settings."""
    s = e.strategy
    if dlrm_of(model) is not None:
        return {"plan": s.short(), "strategy": s.to_dict(), "metrics": metrics_dict(e.metrics),
                "torchrec": "autoplan export RUN --format torchrec prints the per-table sharding plan"}
    if model is not None and model.structure is not None:   # a CNN: a PyTorch launch, not a transformer trainer's
        return {"plan": s.short(), "strategy": s.to_dict(), "metrics": metrics_dict(e.metrics),
                "pytorch": pytorch_text(s, model)}
    try:
        megatron: dict = {"args": megatron_args(s, model, flash_attention), "notes": megatron_notes(s, model)}
    except SpecError as err:
        megatron = {"args": None, "notes": [str(err)]}
    return {"plan": s.short(), "strategy": s.to_dict(), "metrics": metrics_dict(e.metrics), "megatron": megatron,
            "torchtitan_toml": torchtitan_toml(s, model)}


def best_plan_json(e: Any, model: ModelSpec | None, flash_attention: bool = True) -> str:
    """best_plan.json's text."""
    return json.dumps(best_plan(e, model, flash_attention), indent=2)
