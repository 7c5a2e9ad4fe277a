"""The H100's clock: the sourced `clock_ratio` of cluster_specs/dgx-h100-80g.toml (the sustained BF16 GEMM rate at
the 700 W limit over the boost-clock rate, a microbenchmark cited in that file) against 0.85, the value it replaced,
which had been fitted to one validate row. Prints each H100 case's signed error under both and the mean/max |error|
of every counted `validate` run (known gaps included, as validate counts them).

Run: python benchmarks/bench_h100_calibration.py [--quick]     (--quick: the cases on at most 64 GPUs only)
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from statistics import mean
from unittest import mock

from autoplan import validate
from autoplan.specs.cluster import load_cluster
from autoplan.validate import transformer

SOURCED = load_cluster("dgx-h100-80g").gpu.clock_ratio
"""clock_ratio in cluster_specs/dgx-h100-80g.toml (microbenchmark, cited there)."""
RETIRED = 0.85
"""The clock_ratio it replaced: fitted to dgxc-h100-bf16-gpt3-175b-128gpu, a row validate counts."""
QUICK_GPUS = 64
"""--quick keeps the cases on at most this many GPUs."""


def _loader(clock: float):
    def load(name: str, gpus: int | None = None):
        cluster = load_cluster(name, gpus)
        if name != "dgx-h100-80g":
            return cluster
        return replace(cluster, gpu=replace(cluster.gpu, clock_ratio=clock))
    return load


def _errors(clock: float, cases: list[dict]) -> tuple[dict[str, float], float, float]:
    errors, counted = {}, []
    with mock.patch.object(transformer, "load_cluster", _loader(clock)):
        for case in cases:
            result = validate.run_case(case)
            if result.error_pct is None:
                continue
            counted.append(abs(result.error_pct))
            if "H100" in str(case["hardware"].get("gpu")):
                errors[case["id"]] = result.error_pct
    return errors, mean(counted), max(counted)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"only the cases on at most {QUICK_GPUS} GPUs")
    quick = ap.parse_args().quick
    cases = [c for c in validate.load()["cases"] if "calibration" not in c]
    if quick:
        cases = [c for c in cases if c["hardware"]["num_gpus"] <= QUICK_GPUS]
        print(f"--quick: {len(cases)} cases on at most {QUICK_GPUS} GPUs ('all counted runs' means these)")
    clocks = [(SOURCED, "sourced"), (RETIRED, "retired fit")]
    results = [_errors(clock, cases) for clock, _ in clocks]
    heads = [f"{clock:.3f} {what}" for clock, what in clocks]
    print(f"{'case (clock_ratio)':54s}" + "".join(f"{h:>20s}" for h in heads))
    for case_id in results[0][0]:
        print(f"{case_id:54s}" + "".join(f"{r[0][case_id]:+19.1f}%" for r in results))
    for precision in ("bf16", "fp8"):
        label = f"H100 {precision.upper()} rows: mean |error|"
        print(f"{label:54s}" + "".join(
            f"{mean(abs(e) for k, e in r[0].items() if f'-{precision}-' in k):19.2f}%" for r in results))
    print(f"{'public.yaml counted runs: mean |error|':54s}" + "".join(f"{r[1]:19.2f}%" for r in results))
    print(f"{'public.yaml counted runs: max |error|':54s}" + "".join(f"{r[2]:19.2f}%" for r in results))


if __name__ == "__main__":
    main()
