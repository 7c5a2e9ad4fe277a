"""NVIDIA dgxc-benchmarking's measured H100 recipe runs (autoplan/data/dgxc_runs.yaml) against autoplan, by release,
precision and model: how many runs, the mean signed and absolute error of the step time, the worst run.

Every run is also in `autoplan validate` (the H100 recipe groups); this prints the slice by recipe and NeMo version
that the validate table spreads over 129 rows.

Run: python benchmarks/bench_dgxc.py
"""
from __future__ import annotations

from collections import defaultdict
from importlib import resources
from pathlib import Path
from statistics import mean

from autoplan.validate import validate


def main() -> None:
    report = validate(Path(str(resources.files("autoplan") / "data" / "dgxc_runs.yaml")))
    groups: dict[tuple[str, str, str], list] = defaultdict(list)
    for r in report.runs:
        _, release, _, precision, model, size, _ = r.id.split("-")
        groups[(release, precision, f"{model} {size}")].append(r)
    print(f"{'release':9} {'precision':9} {'model':16} {'runs':>4} {'signed':>8} {'|error|':>8} {'worst':>8}  unfit")
    for (release, precision, model), rows in sorted(groups.items()):
        errs = [r.error_pct for r in rows]
        worst = max(errs, key=abs)
        unfit = sum(not r.fits for r in rows)
        print(f"{release:9} {precision:9} {model:16} {len(rows):>4} {mean(errs):>+7.1f}% {mean(map(abs, errs)):>7.1f}% "
              f"{worst:>+7.1f}%  {unfit or ''}")
    errs = [r.error_pct for r in report.runs]
    print(f"all {len(errs)} runs: mean |error| {mean(map(abs, errs)):.2f} %, signed {mean(errs):+.2f} %, max "
          f"{max(map(abs, errs)):.2f} %; {sum(e < 0 for e in errs)} predicted too fast "
          f"of {len(errs)}")


if __name__ == "__main__":
    main()
