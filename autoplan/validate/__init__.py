"""Fidelity: predictions against published, measured training runs (``autoplan validate``).

Every run of the file counts, known gaps included (they are labelled, never left out); only the runs that
calibrate a constant of ``cluster_specs/`` are left out of the figures, and named. Beside the shipped model's
errors, each reference group is predicted with a compute clock calibrated on the other groups of its calibration
pool, a GPU and its spec's compute constants (leave one group out, ``calibration.py``). Measured memory peaks are
an accuracy figure of their own; two consistency checks (the memory formulas against the paper's own formulas, the
NCCL efficiencies against the rows they were set from) are reported apart, as checks and not as accuracy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Callable, TypeVar

from autoplan.errors import SpecError
from autoplan.specs.cluster import list_clusters, specs_dir
from autoplan.specs.files import read_toml
from autoplan.validate import calibration
from autoplan.validate.checks import run_bandwidth_case, run_memory_case, run_memory_run
from autoplan.validate.files import default_file, load, load_default
from autoplan.validate.others import dlrm_cluster, dlrm_model, run_cnn_case, run_dlrm_case
from autoplan.validate.results import CaseResult, CheckResult, summary
from autoplan.validate.transformer import (cluster_of, group_of, model_of, plan_space, precision_of, run_case,
                                          run_variants)

__all__ = ["CaseResult", "CheckResult", "Report", "validate", "load", "default_file", "cluster_of", "group_of",
           "model_of", "plan_space", "precision_of", "run_case", "dlrm_cluster", "dlrm_model"]

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Report:
    """Everything ``autoplan validate`` prints."""

    runs: list[CaseResult]
    """Every measured run, in file order: transformers, then CNNs, then recommendation models."""
    memory_runs: list[CheckResult] = field(default_factory=list)
    """Measured peak memory of real runs."""
    checks: list[CheckResult] = field(default_factory=list)
    """Consistency checks (not accuracy): formula against formula, efficiencies against their own source rows."""
    in_sample: calibration.Calibrated | None = None
    logo: calibration.Calibrated | None = None
    calibrated_specs: list[dict] = field(default_factory=list)
    """The cluster specs of counted runs that ``autoplan calibrate`` fitted (``calibrated_specs``): what each fitted,
    and on which measurements (never a run of this file)."""

    summary = staticmethod(summary)

    @property
    def cases(self) -> list[CaseResult]:
        """The transformer runs."""
        return [r for r in self.runs if r.kind == "transformer"]

    @property
    def cnn(self) -> list[CaseResult]:
        """The CNN runs."""
        return [r for r in self.runs if r.kind == "cnn"]

    @property
    def dlrm(self) -> list[CaseResult]:
        """The recommendation-model runs."""
        return [r for r in self.runs if r.kind == "dlrm"]

    @property
    def memory(self) -> list[CheckResult]:
        """The memory-formula consistency check."""
        return [c for c in self.checks if c.unit == "GiB"]

    @property
    def bandwidth(self) -> list[CheckResult]:
        """The NCCL consistency check."""
        return [c for c in self.checks if c.unit == "GB/s"]

    @property
    def calibration_runs(self) -> list[CaseResult]:
        """The runs left out because a shipped constant was calibrated on them."""
        return [r for r in self.runs if r.calibration]

    def groups(self) -> dict[str, list[CaseResult]]:
        """Runs by group, in file order."""
        out: dict[str, list[CaseResult]] = {}
        for r in self.runs:
            out.setdefault(r.group, []).append(r)
        return out

    def calibrated_summary(self, rows: list[CaseResult], calibrated: calibration.Calibrated | None) -> dict:
        """Mean and max |error| (%) of ``rows`` that count, predicted under ``calibrated``."""
        if calibrated is None:
            return {"n": 0, "mean_abs_pct": math.nan, "max_abs_pct": math.nan}
        errs = [100 * abs(calibrated.predicted[r.id] - r.measured) / r.measured for r in rows
                if r.counted and r.id in calibrated.predicted]
        return {"n": len(errs), "mean_abs_pct": mean(errs) if errs else math.nan,
                "max_abs_pct": max(errs) if errs else math.nan}


def _guarded(run: Callable[..., T], item: dict, what: str, *args: object) -> T:
    """``run(item, *args)``, its errors named by the file's item (a value of a shape the checks did not foresee)."""
    try:
        return run(item, *args)
    except SpecError as err:
        raise SpecError(f"validation file: {what} {str(item.get('id', '?'))[:60]!r}: {err}") from None
    except (KeyError, TypeError, ValueError, AttributeError, StopIteration, ArithmeticError) as err:
        raise SpecError(f"validation file: {what} {str(item.get('id', '?'))[:60]!r} is malformed "
                        f"({type(err).__name__}: {err})") from None


def validate(path: Path | None = None, calibrate: bool = True) -> Report:
    """Run every case of the file; with ``calibrate``, also the in-sample and leave-one-group-out clock fits."""
    where = Path(path) if path else default_file()
    data = load(path) if path else load_default()
    cases = data["cases"]
    runs = ([row for c in cases for row in [_guarded(run_case, c, "case", where), *_guarded(run_variants, c, "case",
                                                                                              where)]]
            + [_guarded(run_cnn_case, c, "CNN case") for c in data.get("cnn_cases", [])]
            + [_guarded(run_dlrm_case, c, "DLRM case") for c in data.get("dlrm_cases", [])])
    bandwidth = [_guarded(run_bandwidth_case, b, "collective") for b in data.get("collective_bandwidth", [])
                 if "op" in b]
    usable = [b for b in bandwidth if b.note == "" or b.predicted is not None]
    formula = [r for mc in data.get("memory_cases", []) for r in _guarded(run_memory_case, mc, "memory case", cases)]
    memory_runs = [_guarded(run_memory_run, m, "memory run", where) for m in data.get("memory_runs", [])]
    in_sample = logo = None
    if calibrate:
        curves = calibration.curves(runs)
        in_sample, logo = calibration.in_sample(curves), calibration.leave_one_group_out(curves)
    return Report(runs=runs, memory_runs=memory_runs, checks=formula + usable + [b for b in bandwidth
                                                                                 if b not in usable],
                  in_sample=in_sample, logo=logo, calibrated_specs=calibrated_specs(cases))


def calibrated_specs(cases: list[dict]) -> list[dict]:
    """Each built-in cluster spec the runs name (``hardware.cluster_spec``) that carries ``autoplan calibrate``'s
    provenance table: its name, the constants fitted, the input files and how many measurements they held."""
    out, built_in = [], set(list_clusters())
    for name in dict.fromkeys(str(c.get("hardware", {}).get("cluster_spec") or "") for c in cases):
        if name not in built_in:
            continue
        table = read_toml(specs_dir() / f"{name}.toml", "cluster").get("calibration")
        if table:
            out.append({"spec": name, "fitted": [k.split(".", 1)[1] for k in table.get("fitted", {})],
                        "inputs": [i["path"] for i in table.get("inputs", [])],
                        "measurements": table.get("measurements", 0)})
    return out
