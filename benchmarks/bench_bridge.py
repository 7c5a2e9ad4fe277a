"""Megatron-Bridge's performance summary for the NeMo 26.02 to 26.06 containers (autoplan/data/bridge_runs.yaml),
held out: each row predicted with its release's preset, by GPU, model and precision, release by release; then, for
the Blackwell GPUs, the FP8 GEMM efficiency each release's rows would want (every other constant as shipped), beside
the shipped one (gb200-nvl72's calibrated on NeMo 25.04's runs, gb300-nvl72's the B200 microbenchmark's): how far a
constant carries across software releases.

Every run is also in `autoplan validate` (the Megatron-Bridge groups); this prints the slice by release.

Run: python benchmarks/bench_bridge.py [--quick]   (--quick: the H100 rows only, no GB200 fits)
"""
from __future__ import annotations

import argparse
import re
from collections import defaultdict
from dataclasses import replace
from importlib import resources
from pathlib import Path
from statistics import mean

from autoplan.specs.cluster import load_cluster
from autoplan.validate import validate

ID = re.compile(r"bridge-(h100|b200|gb200|gb300)-(\w+?)-([a-z0-9.-]+?)-(\d+)gpu-([\d.]+)$")
"""A row's id: GPU, precision, model, GPUs, release."""


def _fp8_efficiency_wanted(rows: list) -> float:
    """The FP8 GEMM efficiency at which ``rows``' mean signed error is zero (bisection on each row's re-run)."""
    lo, hi = 0.3, 1.0

    def signed(eff: float) -> float:
        return mean(r.rerun(lambda c: replace(c, gpu=replace(c.gpu, fp8_gemm_efficiency=eff))) / r.measured - 1
                    for r in rows)
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if signed(mid) > 0 else (lo, mid)
    return (lo + hi) / 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the H100 rows only, no GB200 fits (CI)")
    args = ap.parse_args()
    report = validate(Path(str(resources.files("autoplan") / "data" / "bridge_runs.yaml")), calibrate=False)
    groups: dict[tuple[str, str, str], list] = defaultdict(list)
    for r in report.runs:
        m = ID.match(r.id)
        if m and r.counted and (not args.quick or m.group(1) == "h100"):
            gpu, precision, model, _, release = m.groups()
            groups[(gpu, model, precision)].append((release, r))
    print(f"{'gpu':5} {'model':16} {'precision':9} {'release':9} {'measured s':>10} {'predicted':>10} {'error':>8}")
    for (gpu, model, precision), rows in sorted(groups.items()):
        for release, r in sorted(rows, key=lambda x: [int(p) for p in x[0].split(".")]):
            print(f"{gpu:5} {model:16} {precision:9} {release:9} {r.measured:>10.2f} {r.predicted:>10.2f} "
                  f"{r.error_pct:>+7.1f}%")
    for gpu in sorted({k[0] for k in groups}):
        errs = [r.error_pct for k, rows in groups.items() if k[0] == gpu for _, r in rows]
        print(f"{gpu}: {len(errs)} runs, mean |error| {mean(map(abs, errs)):.2f} %, signed {mean(errs):+.2f} %, "
              f"max {max(map(abs, errs)):.2f} %")
    if args.quick:
        return
    for gpu, spec in (("gb200", "gb200-nvl72"), ("gb300", "gb300-nvl72")):
        by_release: dict[str, list] = defaultdict(list)
        for (g, _, _), rows in groups.items():
            for release, r in rows:
                if g == gpu:
                    by_release[release].append(r)
        print(f"{gpu.upper()} FP8 GEMM efficiency each release's rows want (shipped "
              f"{load_cluster(spec).gpu.fp8_gemm_efficiency:.4f}):")
        for release, rows in sorted(by_release.items(), key=lambda x: [int(p) for p in x[0].split(".")]):
            print(f"  {release:9} {len(rows)} runs: {_fp8_efficiency_wanted(rows):.4f}")


if __name__ == "__main__":
    main()
