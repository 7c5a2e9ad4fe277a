"""The layer model against one transformer layer measured on an H100 (cluster_specs/calibration/h100-layer-steps*.json,
taken by benchmarks/device/layer_step.py, eager and under torch.compile; figures in benchmarks/bench_layer_steps.py):
forward + backward of a TP shard within the stated margins, and its GEMMs alone within theirs. The measurements are microbenchmarks, not rows
`autoplan validate` counts, and no constant was fitted to them."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from autoplan.families.catalog import get_model
from autoplan.families.transformer.layer import layer_compute
from autoplan.specs import load_cluster

CALIBRATION = Path(__file__).resolve().parents[3] / "cluster_specs" / "calibration"
MEASURED = json.loads((CALIBRATION / "h100-layer-steps.json").read_text())
COMPILED = json.loads((CALIBRATION / "h100-layer-steps-compiled.json").read_text())
"""The same layers under torch.compile: norms, activations and residual adds fused, as Transformer Engine's are."""
H100 = load_cluster("dgx-h100-80g", 8)
H100 = replace(H100, gpu=replace(H100.gpu, speed_variability=0.0))
"""One GPU timed alone: no slower GPU of a job sets its pace (``GPUSpec.pace``)."""
GEMMS = ("qkv", "proj", "fc1", "fc2")
LAYER_MEAN_PCT, LAYER_MAX_PCT = 5.0, 14.0
"""Written figures 3.65 % mean, 12.14 % max, signed +1.46 % (2026-11-27), with about 1.4 and 1.9 points of margin."""
COMPILED_MEAN_PCT, COMPILED_MAX_PCT = 7.0, 14.5
"""Written figures 5.64 % mean, 12.59 % max, signed +5.64 % (2026-11-27)."""
GEMM_MAX_PCT = 10.0
"""Written: the GEMMs alone -0.2 to +7.8 %."""


def _predicted(row: dict) -> tuple[float, float]:
    model = get_model(row["model"])
    model = replace(model, seq_len=row["seq"]) if model.seq_len != row["seq"] else model
    layer = layer_compute(model, H100, row["tp"], 1, False, row["mb"], "none")
    ops = layer.forward + layer.backward
    return sum(o.seconds for o in ops), sum(o.seconds for o in ops if o.name.split(".")[0] in GEMMS)


def test_the_files_are_h100_measurements():
    for data in (MEASURED, COMPILED):
        assert data["gpu"].startswith("NVIDIA H100") and len(data["rows"]) == 6
    assert all(r["compiled"] for r in COMPILED["rows"])


def test_a_layer_step_is_within_the_written_margins():
    errors = [100 * (_predicted(r)[0] / r["layer_fwd_bwd_s"] - 1) for r in MEASURED["rows"]]
    assert statistics.mean(map(abs, errors)) < LAYER_MEAN_PCT and max(map(abs, errors)) < LAYER_MAX_PCT, errors


def test_a_fused_layer_step_is_within_the_written_margins():
    errors = [100 * (_predicted(r)[0] / r["layer_fwd_bwd_s"] - 1) for r in COMPILED["rows"]]
    assert statistics.mean(map(abs, errors)) < COMPILED_MEAN_PCT and max(map(abs, errors)) < COMPILED_MAX_PCT, errors


@pytest.mark.parametrize("row", MEASURED["rows"], ids=lambda r: f"{r['model']}-tp{r['tp']}-mb{r['mb']}")
def test_its_gemms_are_within_the_written_margin(row):
    error = 100 * (_predicted(row)[1] / row["gemms_alone_s"] - 1)
    assert abs(error) < GEMM_MAX_PCT, error
