"""How far calibration carries: each reference group predicted with a compute clock fitted on the other groups of
its calibration pool (leave one group out, what a user who calibrates on other runs gets), beside the same fit on
every group (in-sample).

The fitted parameter is one per pool: a factor on the spec's ``clock_ratio``, which scales every GEMM and attention
kernel (``hardware/compute.py``). A pool is a GPU and the compute constants its spec carries
(``results.gpu_constants``): specs that differ only in their host or network share it, while a spec whose GEMM
constants were measured on its own machine (SimuMax's B200 node) is a pool of its own, so a correction fitted to
another spec's constants is never applied to it. Each run is re-simulated at a few factors and its prediction
interpolated (log-log, piecewise linear) in between, so a fit costs no further simulation. The objective is the mean
|log(predicted / measured)|, symmetric in over- and under-prediction and the same for times and rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from autoplan.validate.results import CaseResult

FACTORS = (0.8, 1.0, 1.25)
"""Clock factors each run is simulated at (1.0: the shipped spec); fits stay inside their range."""
_GRID = tuple(FACTORS[0] * (FACTORS[-1] / FACTORS[0]) ** (i / 200) for i in range(201))


def _at(factor: float) -> Any:
    def change(cluster: Any) -> Any:
        return replace(cluster, gpu=replace(cluster.gpu, clock_ratio=cluster.gpu.clock_ratio * factor))
    return change


@dataclass(frozen=True)
class Curve:
    """One run's prediction at each of ``FACTORS``, and its measured value."""

    run: CaseResult
    values: tuple[float, ...]

    def at(self, factor: float) -> float:
        """The prediction at ``factor``, interpolated in log-log between the simulated factors."""
        xs = [math.log(f) for f in FACTORS]
        x = min(max(math.log(factor), xs[0]), xs[-1])
        i = 0 if x <= xs[1] else 1
        ys = [math.log(v) for v in self.values[i:i + 2]]
        w = (x - xs[i]) / (xs[i + 1] - xs[i])
        return math.exp(ys[0] + w * (ys[1] - ys[0]))

    def loss(self, factor: float) -> float:
        """|log(predicted / measured)| at ``factor``."""
        return abs(math.log(self.at(factor) / self.run.measured))


def curves(runs: list[CaseResult]) -> list[Curve]:
    """The clock curve of every run that has a prediction and can be re-simulated."""
    out = []
    for r in runs:
        if r.rerun is None or r.predicted is None or r.measured <= 0:
            continue
        values = tuple(r.predicted if f == 1.0 else r.rerun(_at(f)) for f in FACTORS)
        if all(v and v > 0 and math.isfinite(v) for v in values):
            out.append(Curve(r, values))
    return out


def fit(training: list[Curve]) -> float:
    """The clock factor minimising the mean |log error| over ``training`` (1.0 when it is empty)."""
    if not training:
        return 1.0
    return min(_GRID, key=lambda f: (sum(c.loss(f) for c in training), abs(math.log(f))))


@dataclass(frozen=True)
class Calibrated:
    """Each run's prediction under a calibration, and the factor each pool got."""

    predicted: dict[str, float]
    """Run id → prediction."""
    factors: dict[str, float]
    """Pool (for leave-one-group-out: ``group @ pool``) → fitted clock factor."""


def pool(run: CaseResult) -> str:
    """The calibration pool of a run: its GPU and that GPU's compute constants."""
    return f"{run.gpu} [{run.constants}]" if run.constants else run.gpu


def in_sample(all_curves: list[Curve]) -> Calibrated:
    """One factor per pool fitted on all its counted runs, predicting them all."""
    factors = {p: fit([c for c in all_curves if pool(c.run) == p and c.run.counted])
               for p in {pool(c.run) for c in all_curves}}
    return Calibrated({c.run.id: c.at(factors[pool(c.run)]) for c in all_curves}, factors)


def leave_one_group_out(all_curves: list[Curve]) -> Calibrated:
    """Each group predicted with the factor fitted on the counted runs of the other groups in its pool (the
    shipped spec when no other group shares it)."""
    factors = {}
    for group in {c.run.group for c in all_curves}:
        for p in {pool(c.run) for c in all_curves if c.run.group == group}:
            training = [c for c in all_curves if pool(c.run) == p and c.run.group != group and c.run.counted]
            factors[f"{group} @ {p}"] = fit(training)
    return Calibrated({c.run.id: c.at(factors[f"{c.run.group} @ {pool(c.run)}"]) for c in all_curves}, factors)
