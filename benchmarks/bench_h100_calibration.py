"""The H100's clock calibration against NVIDIA's H100 recipes: the fitted `clock_ratio` of
cluster_specs/dgx-h100-80g.toml against the one derived from published matmul measurements (see that file's
comment), each with TP-comm overlap off (what `autoplan validate` models) and on where the recipe's config file
runs it (`ub_tp_comm_overlap: true`: dgxc-benchmarking nemo_megatron/gpt3_175b_hydra.yaml for GPT-3 175B, NeMo
Launcher llama3_1_70b.yaml for Llama 3.1 70B; public.yaml lists both under the rows' repo_files). Prints each H100
case's signed error and the counted mean/max |error| of all `validate` runs (known gaps left out).

Run: python benchmarks/bench_h100_calibration.py [--quick]     (--quick: the cases on at most 64 GPUs only)
"""

from __future__ import annotations

import argparse
import copy
from dataclasses import replace
from statistics import mean
from unittest import mock

from autoplan import validate

FITTED = 0.85
"""clock_ratio in cluster_specs/dgx-h100-80g.toml (set on dgxc-h100-bf16-gpt3-175b-128gpu, overlap off)."""
SOURCED = 0.92
"""clock_ratio from the sustained/burst matmul ratio on the GH100 die (dgx-h100-80g.toml comment)."""
OVERLAP_RECIPES = ("gpt3-175b", "llama31-70b")
"""Ids of the dense H100 recipes whose config files set ub_tp_comm_overlap: true."""
QUICK_GPUS = 64
"""--quick keeps the cases on at most this many GPUs (H100 BF16 and FP8 rows, an overlap recipe, A100 rows)."""


def _loader(clock: float):
    base = validate.load_cluster

    def load(name: str, gpus: int | None = None):
        cluster = base(name, gpus)
        if name != "dgx-h100-80g":
            return cluster
        return replace(cluster, gpu=replace(cluster.gpu, clock_ratio=clock))
    return load


def _errors(clock: float, overlap: bool, cases: list[dict]) -> tuple[dict[str, float], float, float]:
    errors, counted = {}, []
    with mock.patch.object(validate, "load_cluster", _loader(clock)):
        for case in cases:
            case = copy.deepcopy(case)
            h100 = "H100" in str(case["hardware"].get("gpu"))
            if overlap and h100 and any(k in case["id"] for k in OVERLAP_RECIPES):
                case["strategy"] |= {"tp_comm_overlap": True, "sequence_parallel": True}
            result = validate.run_case(case)
            if result.error_pct is None or result.known_gap:
                continue
            counted.append(abs(result.error_pct))
            if h100:
                errors[case["id"]] = result.error_pct
    return errors, mean(counted), max(counted)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"only the cases on at most {QUICK_GPUS} GPUs")
    quick = ap.parse_args().quick
    cases = validate.load()["cases"]
    if quick:
        cases = [c for c in cases if c["hardware"]["num_gpus"] <= QUICK_GPUS]
        print(f"--quick: {len(cases)} cases on at most {QUICK_GPUS} GPUs ('all counted runs' means these)")
    runs = [(FITTED, False), (FITTED, True), (SOURCED, False), (SOURCED, True)]
    results = [_errors(clock, overlap, cases) for clock, overlap in runs]
    heads = [f"{clock:.2f} {'on' if overlap else 'off'}" for clock, overlap in runs]
    print(f"{'case (clock_ratio, TP overlap)':36s}" + "".join(f"{h:>10s}" for h in heads))
    for case_id in results[0][0]:
        print(f"{case_id:36s}" + "".join(f"{r[0][case_id]:+9.1f}%" for r in results))
    for precision in ("bf16", "fp8"):
        label = f"H100 {precision.upper()} rows: mean |error|"
        print(f"{label:36s}" + "".join(
            f"{mean(abs(e) for k, e in r[0].items() if f'-{precision}-' in k):9.2f}%" for r in results))
    print(f"{'all counted runs: mean |error|':36s}" + "".join(f"{r[1]:9.2f}%" for r in results))
    print(f"{'all counted runs: max |error|':36s}" + "".join(f"{r[2]:9.2f}%" for r in results))


if __name__ == "__main__":
    main()
