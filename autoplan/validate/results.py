"""What ``autoplan validate`` produces: one result per measured run or check, and the summaries over them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import mean
from typing import Any, Callable

RUN_KINDS = ("transformer", "cnn", "dlrm")


def gpu_constants(gpu: Any) -> str:
    """The compute constants a clock calibration corrects, as a label: two specs of one GPU that carry the same
    ones (a cluster's host or network constants aside) are one calibration pool."""
    return (f"GEMM {gpu.gemm_efficiency:.4g}, clock {gpu.clock_ratio:.4g}, HBM {gpu.memory_efficiency:.4g}, "
            f"half-k {gpu.gemm_half_k:.4g}, kernel {gpu.kernel_overhead * 1e6:.4g} us")


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    """One published, measured run against its prediction."""

    id: str
    group: str
    metric: str
    """``iteration_time_s``, ``tflops_per_gpu`` (hardware FLOPs, Megatron SC'21 eq. 3), ``seconds_per_sample`` or
    ``samples_per_s``."""
    measured: float
    predicted: float | None
    plan: Any
    kind: str = "transformer"
    """Which family of runs (``RUN_KINDS``): transformers, CNNs or recommendation models."""
    gpu: str = ""
    """The GPU of the run's cluster spec."""
    constants: str = ""
    """The compute constants of that GPU's spec (``gpu_constants``): runs that share the GPU and these constants
    share a calibration; a spec measured on its own machine (SimuMax's B200 node) is a pool of its own."""
    searched: tuple[str, ...] = ()
    """Knobs the source did not publish, searched here (the fastest feasible plan is reported)."""
    note: str = ""
    known_gap: str = ""
    """Why the file marks this run as a known gap of the model: shown and counted like every run."""
    calibration: str = ""
    """The constant this run calibrates (``cluster_specs/*.toml`` names it): such a run is left out of every figure."""
    variant_of: str = ""
    """The run this row reads another way (a paper and its script disagree): shown beside it, never counted."""
    needs: tuple[str, ...] = ()
    """What the run used that autoplan cannot describe (the file's ``needs``: torch.compile, CUDA graphs, …): counted
    like every run, and shown."""
    fits: bool = True
    """False when no plan of the run fits in the memory model: the plan closest to fitting is timed and counted
    anyway (a run that ran did fit: the memory model's miss, shown, never a run left out)."""
    rerun: Callable[[Callable[[Any], Any]], float | None] | None = field(default=None, compare=False, repr=False)
    """The same prediction on a changed cluster (``rerun(change)``, change: ClusterSpec -> ClusterSpec), for the
    leave-one-group-out calibration; None when the run has no prediction."""

    @property
    def error_pct(self) -> float | None:
        """Signed error of the prediction, in % of the measured value."""
        return None if self.predicted is None else 100 * (self.predicted - self.measured) / self.measured

    @property
    def counted(self) -> bool:
        """In the accuracy figures: every run with a prediction that calibrates nothing."""
        return self.predicted is not None and not self.calibration and not self.variant_of


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """A memory figure or a bus bandwidth against its prediction."""

    id: str
    quantity: str
    reference: float
    predicted: float | None
    unit: str
    note: str = ""
    group: str = ""

    @property
    def error_pct(self) -> float | None:
        """Signed error in % of the reference."""
        return None if self.predicted is None else 100 * (self.predicted - self.reference) / self.reference


def summary(rows: list, *, gaps: bool = True) -> dict[str, float]:
    """Mean, max and signed mean error (%) over the rows that count (``gaps=False`` also leaves the known gaps out)."""
    keep = [r for r in rows if r.error_pct is not None and getattr(r, "counted", True)
            and (gaps or not getattr(r, "known_gap", ""))]
    errs = [r.error_pct for r in keep]
    nan = float("nan")
    return {"n": len(errs), "mean_abs_pct": mean(abs(e) for e in errs) if errs else nan,
            "max_abs_pct": max(abs(e) for e in errs) if errs else nan,
            "mean_signed_pct": mean(errs) if errs else nan}


def finite(x: float) -> bool:
    """Not NaN nor infinite."""
    return isinstance(x, (int, float)) and math.isfinite(x)
