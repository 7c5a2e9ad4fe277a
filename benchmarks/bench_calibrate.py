"""Calibration on pairs, prediction of the rest: for each reference group of the public set (autoplan/data/public.yaml)
with at least 3 counted runs, `autoplan calibrate`'s fit on a pair of the group's runs (every pair, at most 10, spread
evenly over the pairs in order) predicts the group's other runs; prints the mean and max |error| of those predictions
per group and overall (target: 5 % mean), beside the uncalibrated spec's on the same runs, and what the calibrated
H100 and A100 constants come out as on all of each GPU's runs, against the specs' sourced values.

Errors are of step time (a TFLOP/s run's published rate converted to seconds as `autoplan validate` compares it).
Each run keeps the plan the base spec finds fastest among those its source leaves open. Known gaps are left out, as
`autoplan validate` leaves them out of its means.

Run: python benchmarks/bench_calibrate.py [--quick]      (--quick: 1 pair per group)
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections import defaultdict
from statistics import mean

from autoplan.calibrate.fit import calibrate
from autoplan.calibrate.measurements import Inputs, Step
from autoplan.calibrate.model import load_cluster, validation
from autoplan.calibrate.predict import best_plan, step_seconds
from autoplan.calibrate.read_steps import parse

BASES = ("dgx-a100-80g", "dgx-h100-80g", "abci-v100")
"""The clusters of the public set's counted runs (transformer runs by GPU; CNN and DLRM runs by their cluster)."""


def sourced(name: str) -> str:
    """The spec's own clock and GEMM efficiency (microbenchmark sources cited in the cluster file)."""
    g = load_cluster(name).gpu
    return f"clock_ratio {g.clock_ratio:g}, gemm_efficiency {g.gemm_efficiency:g} (cluster_specs/{name}.toml)"


def spread(items: list, k: int) -> list:
    """At most ``k`` of ``items``, evenly spaced, first and last included."""
    if len(items) <= k:
        return items
    if k == 1:
        return items[:1]
    return [items[round(i * (len(items) - 1) / (k - 1))] for i in range(k)]


def groups() -> dict[str, tuple[str, list[Step]]]:
    """Counted runs by group, each group with its base cluster."""
    path = validation.default_file()
    text = path.read_text()
    out: dict[str, tuple[str, list[Step]]] = {}
    for name in BASES:
        steps, _ = parse(text, path, load_cluster(name))
        for s in steps:
            out.setdefault(s.group, (name, []))[1].append(s)
    return out


def run(pairs_per_group: int, prior: float | None) -> None:
    t0 = time.time()
    all_errs, all_base = [], []
    per_gpu: dict[str, list[Step]] = defaultdict(list)
    print(f"{'group':58s} {'runs':>4s} {'pairs':>5s} {'mean':>7s} {'max':>7s}   {'uncal. mean':>11s} {'max':>7s}"
          f"   fitted (mean over pairs)")
    for group, (name, steps) in groups().items():
        per_gpu[name] += [s for s in steps if s.model.structure is None]      # transformer runs (no CNN, DLRM)
        if len(steps) < 3:
            continue
        base = load_cluster(name)
        plans = {s.name: best_plan(base, s)[0] for s in steps}
        base_err = {s.name: 100 * (step_seconds(base, s, plans[s.name]) - s.seconds) / s.seconds for s in steps}
        errs, base_errs, fitted = [], [], defaultdict(list)
        pairs = spread(list(itertools.combinations(range(len(steps)), 2)), pairs_per_group)
        for i, j in pairs:
            fit = calibrate(Inputs(steps=[steps[i], steps[j]]), base, loo=False, max_residual=1.0, prior=prior)
            for p, v in zip(fit.params, fit.values):
                fitted[p.name.removeprefix("gpu.")].append(v)
            for k, s in enumerate(steps):
                if k in (i, j):
                    continue
                predicted = step_seconds(fit.cluster, s, plans[s.name])
                errs.append(abs(100 * (predicted - s.seconds) / s.seconds))
                base_errs.append(abs(base_err[s.name]))
        all_errs += errs
        all_base += base_errs
        params = ", ".join(f"{k} {mean(v):.3f}" for k, v in fitted.items())
        print(f"{group[:58]:58s} {len(steps):4d} {len(pairs):5d} {mean(errs):6.2f}% {max(errs):6.2f}%   "
              f"{mean(base_errs):10.2f}% {max(base_errs):6.2f}%   {params}")
    print(f"{'all groups':58s} {'':4s} {'':5s} {mean(all_errs):6.2f}% {max(all_errs):6.2f}%   "
          f"{mean(all_base):10.2f}% {max(all_base):6.2f}%   ({len(all_errs)} predictions; target 5 % mean)")
    print()
    for name in ("dgx-h100-80g", "dgx-a100-80g"):
        base = load_cluster(name)
        fit = calibrate(Inputs(steps=per_gpu[name]), base, loo=False, max_residual=1.0)
        g = fit.cluster.gpu
        (p, v, sd), = [(p, v, sd) for p, v, sd in zip(fit.params, fit.values, fit.sds)]
        print(f"{name}: calibrated on all {len(per_gpu[name])} counted transformer runs: {p.name} {v:.3f} ± {sd:.3f} "
              f"(spec {fit.base_values[0]:g}); large GEMMs at {g.gemm_efficiency * g.clock_ratio:.3f} of the BF16 "
              f"peak ({g.gemm_efficiency * g.clock_ratio * g.peak_flops / 1e12:.0f} TFLOP/s; spec "
              f"{base.gpu.gemm_efficiency * base.gpu.clock_ratio:.3f}); rms error {fit.rms_pct:.2f} %")
        print(f"  spec's sourced values: {sourced(name)}")
    print(f"\n{time.time() - t0:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 pair per group instead of 10")
    ap.add_argument("--prior", type=float, default=None, help="relative sd of calibrate's prior (e.g. 0.05); "
                    "default: plain least squares")
    args = ap.parse_args()
    print(f"pair fits: {'plain bounded least squares' if not args.prior else f'prior {args.prior:g} (calibrate --prior)'}")
    if args.quick:
        print("--quick: 1 pair per group (its first two runs), not the figures of a full run")
    run(1 if args.quick else 10, args.prior)


if __name__ == "__main__":
    main()
