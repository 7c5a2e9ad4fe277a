"""FP8 GEMMs by scaling recipe on one H100 (benchmarks/device/fp8_recipes.py, cluster_specs/calibration/
h100-fp8-recipes.json): BF16, tensor-wise FP8 (one scale per operand), row-wise FP8 and blockwise FP8 (1x128 activation,
128x128 weight scales, cuBLAS through torch._scaled_mm, as Transformer Engine runs Megatron-LM's --fp8-recipe blockwise
on Hopper), on MoE expert and layer GEMMs. It prints each recipe's time over BF16's and blockwise over tensor-wise,
and autoplan's FP8 / BF16 time for the same shapes; the geometric mean of blockwise over tensor-wise is the H100's
``fp8_blockwise_gemm_ratio`` (cluster_specs/dgx-h100-80g.toml). The clock NVML read after each row is not the one
the GEMMs ran at (it falls between them), so only ratios within a row are compared.

Run: python benchmarks/bench_fp8_recipes.py [--quick]     (--quick: the same; the file is small)
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from autoplan.hardware.compute import gemm_time
from autoplan.specs import load_cluster

MEASURED = Path(__file__).resolve().parents[1] / "cluster_specs" / "calibration" / "h100-fp8-recipes.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the same (the file is small)")
    parser.parse_args()
    data = json.loads(MEASURED.read_text())
    gpu = load_cluster("dgx-h100-80g", 8).gpu
    print(f"{data['gpu']}, torch {data['torch']}, CUDA {data['cuda']}")
    print(f"{'GEMM':24s} {'m':>5s} {'n':>6s} {'k':>5s} | {'tensor':>6s} {'row':>6s} {'block':>6s} over BF16 | "
          f"{'block/tensor':>12s} | {'autoplan FP8/BF16':>17s}")
    ratios = []
    for r in data["rows"]:
        m, n, k, bf = r["m"], r["n"], r["k"], r["bf16_s"]
        ratios.append(r["blockwise_s"] / r["tensorwise_s"])
        model = gemm_time(gpu, m, n, k, fp8=True) / gemm_time(gpu, m, n, k)
        print(f"{r['what']:24s} {m:5d} {n:6d} {k:5d} | {r['tensorwise_s'] / bf:6.3f} {r['rowwise_s'] / bf:6.3f} "
              f"{r['blockwise_s'] / bf:6.3f}           | {ratios[-1]:12.3f} | {model:17.3f}")
    print(f"blockwise over tensor-wise: geometric mean {statistics.geometric_mean(ratios):.3f}, range "
          f"{min(ratios):.2f}-{max(ratios):.2f} ({len(ratios)} GEMMs); the spec's fp8_blockwise_gemm_ratio: "
          f"{gpu.fp8_blockwise_gemm_ratio}")


if __name__ == "__main__":
    main()
