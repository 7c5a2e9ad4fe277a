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


if __name__ == "__main__":
    main()
