"""autoplan's GEMM model against a public GEMM sweep: XLA's measured matmul table (cluster_specs/calibration/
xla-gemm-table.json: 375 BF16 GEMMs a GPU, batch 1-4 and m, n, k of 256-4096, each the median kernel time of 5 runs
after a warm-up, on an H100 and a B200). No spec constant comes from it; it checks the shape model (tiles, waves, the
main loop's fill, the fixed time a kernel) where validate's runs cannot, on the small GEMMs of small models, narrow
TP shards and MoE experts.

For each GPU this prints autoplan's time over the measured one (``compute.gemm_time``, the spec timed alone at its
burst clock, the clock its MAMF microbenchmark ran at: these are short kernels, not held at the power limit) by the
GEMM's work and by its inner dimension k, then the B200's error over the H100's on the same shapes: how far the two
specs' relative speed is from the one XLA measured with one software stack on both.

Run: python benchmarks/bench_xla_gemm_table.py [--quick]     (--quick: the same; the table is small)
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from statistics import mean

from autoplan.hardware.microbenchmarks import SOURCES, gemm_table_errors
from autoplan.specs import load_cluster

FILE = Path(__file__).resolve().parents[1] / "cluster_specs" / "calibration" / "xla-gemm-table.json"
GPUS = {"sm_90": ("dgx-h100-80g", "H100"), "sm_100_B200": ("dgx-b200", "B200")}
WORK = ((0, 1e9), (1e9, 1e10), (1e10, 1e11), (1e11, 1e14))


def summary(values: list[float]) -> str:
    """Geometric mean and mean |log| of ``values`` (time ratios)."""
    logs = [math.log(v) for v in values]
    return f"n={len(logs):3d} model/measured {math.exp(mean(logs)):.3f}, mean |log| {mean(map(abs, logs)):.3f}"


def work(s: tuple) -> float:
    b, m, n, k = s
    return 2.0 * b * m * n * k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the same (the table is small)")
    ap.parse_args()
    table = json.loads(FILE.read_text())["rows"]
    by_gpu = {}
    for arch, (spec, source) in GPUS.items():
        r = by_gpu[arch] = gemm_table_errors(load_cluster(spec).gpu, table[arch],
                                             SOURCES[source].burst.clock_over_peak_clock)
        print(f"{source} ({spec}), all {summary(list(r.values()))}")
        for lo, hi in WORK:
            print(f"  work {lo:.0e}-{hi:.0e} FLOP: {summary([v for s, v in r.items() if lo <= work(s) < hi])}")
        for k in (256, 512, 1024, 2048, 4096):
            print(f"  k {k:4d}, work >= 1e10: {summary([v for s, v in r.items() if s[3] == k and work(s) >= 1e10])}")
    h, b = by_gpu["sm_90"], by_gpu["sm_100_B200"]
    over = {s: b[s] / h[s] for s in h}
    print("B200 over H100 (each spec's error on the same shape):")
    for lo, hi in WORK:
        print(f"  work {lo:.0e}-{hi:.0e} FLOP: {summary([v for s, v in over.items() if lo <= work(s) < hi])}")


if __name__ == "__main__":
    main()
