"""Plain-JSON forms of evaluations and metrics (for --json, results files and Ray transport)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

GIB = 1024**3


def metrics_dict(m: Any) -> dict:
    """Metrics as plain JSON-ready values (memory in GiB, times in seconds)."""
    return {
        "step_time_s": m.step_time, "tokens_per_s": m.tokens_per_s, "samples_per_s": m.samples_per_s,
        "model_tflops_per_gpu": m.model_tflops_per_gpu, "hardware_tflops_per_gpu": m.hardware_tflops_per_gpu,
        "mfu": m.mfu, "hfu": m.hfu, "breakdown_s": m.breakdown,
        "breakdown_fraction": {k: m.fraction(k) for k in m.breakdown},
        "stage_breakdown_s": list(m.stage_breakdown), "activity_s": list(m.activity),
        "memory_gib": [{k: (v / GIB if k != "stage" else v) for k, v in asdict(x).items()} | {"total": x.total / GIB}
                       for x in m.memory],
        "peak_memory_gib": m.peak_memory / GIB, "memory_capacity_gib": m.memory_capacity / GIB, "fits": m.fits,
    }


def evaluation_dict(e: Any) -> dict:
    """An Evaluation as JSON: the plan, feasibility, reasons and (if feasible) metrics."""
    return {"strategy": e.strategy.to_dict(), "feasible": e.feasible, "violations": list(e.violations),
            "peak_memory_gib": e.peak_memory / GIB,
            "metrics": metrics_dict(e.metrics) if e.metrics is not None else None}
