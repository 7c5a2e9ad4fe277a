"""NVIDIA dgxc-benchmarking's measured recipe runs (autoplan/data/dgxc_runs.yaml, and the first ones compiled into
public.yaml) against autoplan, by release, GPU, precision and model: how many runs, the mean signed and absolute error
of the step time, the worst run. GB200's calibration set (four runs validate leaves out) is not counted.

Every run is also in `autoplan validate` (the H100 and GB200 recipe groups); this prints the slice by recipe and NeMo
version that the validate table spreads over its rows.

Run: python benchmarks/bench_dgxc.py [--quick]   (--quick: Llama 3.1 8B's runs of dgxc_runs.yaml only)
"""
from __future__ import annotations

import argparse
import re
from collections import defaultdict
from importlib import resources
from pathlib import Path
from statistics import mean

from autoplan.validate import validate


ID = re.compile(r"dgxc-(?:(v[\d.]+)-)?(h100|gb200)-(\w+)-([a-z0-9]+)-(\d+b)-\d+gpu(?:-strong)?$")
"""A dgxc run's id: its release (public.yaml's rows were first published in v24.11.1), GPU, precision, model, size
(``-strong``: a table of a fixed global batch)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="Llama 3.1 8B's runs of dgxc_runs.yaml only (CI)")
    args = ap.parse_args()
    report = validate(Path(str(resources.files("autoplan") / "data" / "dgxc_runs.yaml")) if args.quick else None)
    groups: dict[tuple[str, str, str, str], list] = defaultdict(list)
    for r in report.runs:
        m = ID.match(r.id)
        if m and r.counted and (not args.quick or "llama31-8b" in r.id):
            release, gpu, precision, model, size = m.groups()
            groups[(release or "v24.11.1", gpu, precision, f"{model} {size}")].append(r)
    print(f"{'release':9} {'gpu':5} {'precision':9} {'model':16} {'runs':>4} {'signed':>8} {'|error|':>8} {'worst':>8}  "
          "unfit")
    for (release, gpu, precision, model), rows in sorted(groups.items()):
        errs = [r.error_pct for r in rows]
        worst = max(errs, key=abs)
        unfit = sum(not r.fits for r in rows)
        print(f"{release:9} {gpu:5} {precision:9} {model:16} {len(rows):>4} {mean(errs):>+7.1f}% "
              f"{mean(map(abs, errs)):>7.1f}% {worst:>+7.1f}%  {unfit or ''}")
    errs = [r.error_pct for rows in groups.values() for r in rows]
    print(f"all {len(errs)} runs: mean |error| {mean(map(abs, errs)):.2f} %, signed {mean(errs):+.2f} %, max "
          f"{max(map(abs, errs)):.2f} %; {sum(e < 0 for e in errs)} predicted too fast "
          f"of {len(errs)}")
    repeats(groups)


def repeats(groups: dict[tuple[str, str, str, str], list]) -> None:
    """The same plan in several releases: runs of one GPU, precision and model whose plans are the same (NeMo's
    parameter remainders aside, which autoplan prices as nothing) and predicted alike within 0.1 % (so with the same
    layer count), but that ran under different software. Their measured spread is what a model blind to the software
    version cannot follow."""
    same: dict[tuple, list] = defaultdict(list)
    for (release, gpu, precision, model), rows in groups.items():
        for r in rows:
            plan = " ".join(w for w in r.plan.short().split() if w != "rem")
            key = (gpu, precision, model, r.plan.gpus, plan)
            anchor = next((k for k in same if k[:5] == key and abs(r.predicted / k[5] - 1) < 1e-3), None)
            same[anchor or (*key, r.predicted)].append((release, r.measured))
    spreads = []
    for key, seen in sorted(same.items()):
        if len({release for release, _ in seen}) > 1:
            times = [t for _, t in seen]
            spreads.append((max(times) / min(times) - 1, key, sorted(seen)))
    if not spreads:
        return
    print(f"\nthe same plan in several releases (predicted alike): {len(spreads)} plans, measured spread (slowest / "
          f"fastest - 1) mean {100 * mean(s for s, _, _ in spreads):.1f} %, max {100 * max(s for s, _, _ in spreads):.1f} %")
    for spread, (gpu, precision, model, gpus, _, _), seen in sorted(spreads, key=lambda x: -x[0])[:8]:
        runs = ", ".join(f"{release} {t:.3g} s" for release, t in seen)
        print(f"  {gpu:5} {precision:5} {model:16} {gpus:>5} GPUs  {100 * spread:5.1f} %  ({runs})")

if __name__ == "__main__":
    main()
