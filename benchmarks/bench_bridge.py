"""Megatron-Bridge's performance summary for the NeMo 25.09 to 26.08 containers (autoplan/data/bridge_runs.yaml),
held out: each row predicted with its release's preset, by GPU, model and precision, release by release, and each
GPU's dense and mixture-of-experts rows summed up apart; then, for the Blackwell GPUs, the FP8 GEMM efficiency each
release's dense rows would want (every other constant as shipped), beside the shipped one (gb200-nvl72's calibrated
on NeMo 25.04's runs, gb300-nvl72's the B200 microbenchmark's): how far a constant carries across software releases.

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

ID = re.compile(r"bridge-(h100|b200|b300|gb200|gb300)-(\w+?)-([a-z0-9.-]+?)-(\d+)gpu-([\d.]+)(-gbs\d+)?$")
"""A row's id: GPU, precision, model, GPUs, release (and the global batch where a release has two)."""
MOE = ("qwen3", "gpt-oss", "deepseek")
"""Model names of the mixture-of-experts rows."""


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


def _release_key(release: str) -> list[int]:
    """A release ("26.04.01", or "26.06-gbs15360" where the release has two rows) as numbers, for sorting."""
    return [int(p) for p in re.split(r"[.-]gbs|\.", release)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the H100 rows only, no GB200 fits (CI)")
    args = ap.parse_args()
    report = validate(Path(str(resources.files("autoplan") / "data" / "bridge_runs.yaml")), calibrate=False)
    groups: dict[tuple[str, str, str], list] = defaultdict(list)
    for r in report.runs:
        m = ID.match(r.id)
        if m and r.counted and (not args.quick or m.group(1) == "h100"):
            gpu, precision, model, _, release, gbs = m.groups()
            groups[(gpu, model, precision)].append((release + (gbs or ""), r))
    print(f"{'gpu':5} {'model':16} {'precision':9} {'release':9} {'measured s':>10} {'predicted':>10} {'error':>8}")
    for (gpu, model, precision), rows in sorted(groups.items()):
        for release, r in sorted(rows, key=lambda x: _release_key(x[0])):
            print(f"{gpu:5} {model:16} {precision:9} {release:9} {r.measured:>10.2f} {r.predicted:>10.2f} "
                  f"{r.error_pct:>+7.1f}%")
    for gpu in sorted({k[0] for k in groups}):
        for kind in ("dense", "MoE"):
            errs = [r.error_pct for k, rows in groups.items() if k[0] == gpu and k[1].startswith(MOE) == (kind == "MoE")
                    for _, r in rows]
            if errs:
                print(f"{gpu} {kind}: {len(errs)} runs, mean |error| {mean(map(abs, errs)):.2f} %, signed "
                      f"{mean(errs):+.2f} %, max {max(map(abs, errs)):.2f} %")
    if args.quick:
        return
    for gpu, spec in (("gb200", "gb200-nvl72"), ("gb300", "gb300-nvl72")):
        by_release: dict[str, list] = defaultdict(list)
        for (g, model, precision), rows in groups.items():
            for release, r in rows:
                if g == gpu and not model.startswith(MOE) and precision != "bf16":
                    by_release[release].append(r)
        print(f"{gpu.upper()} FP8 GEMM efficiency each release's dense rows want (shipped "
              f"{load_cluster(spec).gpu.fp8_gemm_efficiency:.4f}):")
        for release, rows in sorted(by_release.items(), key=lambda x: _release_key(x[0])):
            print(f"  {release:9} {len(rows)} runs: {_fp8_efficiency_wanted(rows):.4f}")


if __name__ == "__main__":
    main()
