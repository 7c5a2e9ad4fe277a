"""autoplan's kernel and layer models against small kernels measured on one H100 (benchmarks/device/small_layers.py,
cluster_specs/calibration/h100-small-layers.json): the layers of vTrain's single-node GPTs (hidden 1024 and 2048,
sequence 1024) at TP 1-8 and micro-batch 1-8, replayed as CUDA graphs (the GPU's time, no host launches) and eager;
BF16 GEMMs of whole tile waves at K 128-16384; one-element kernels back to back.

Each row is predicted with dgx-h100-80g at the SM clock NVML read beside it (clock_ratio = clock / 1830 MHz, the
clock of the datasheet's 989 TFLOP/s; these short runs stay under the 700 W cap) and no job-size pace: what is
compared is how time scales with shape, not the sustained clock.

Run: python benchmarks/bench_small_layers.py [--quick]     (--quick: without the eager table)
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import replace
from pathlib import Path

from autoplan.families.transformer.layer import layer_compute
from autoplan.hardware.compute import gemm_time
from autoplan.specs import ModelSpec, load_cluster

MEASURED = Path(__file__).resolve().parents[1] / "cluster_specs" / "calibration" / "h100-small-layers.json"
PEAK_CLOCK_MHZ = 1830
"""H100 SXM boost clock of the datasheet's dense BF16 peak (NVIDIA H100 whitepaper)."""


def gpu_at(clock_mhz: int):
    gpu = load_cluster("dgx-h100-80g", 8).gpu
    return replace(gpu, clock_ratio=clock_mhz / PEAK_CLOCK_MHZ, speed_variability=0.0)


def layer_seconds(row: dict) -> float:
    """autoplan's forward + backward of the row's TP shard (no bias, dropout or communication, as timed)."""
    cluster = load_cluster("dgx-h100-80g", 8)
    cluster = replace(cluster, gpu=gpu_at(row["sm_clock_mhz"]))
    h = row["hidden"]
    model = ModelSpec(name=row["model"], layers=1, hidden=h, heads=row["heads"], ffn_hidden=row["ffn"], vocab=50257,
                      seq_len=row["seq"], bias=False, dropout=False)
    layer = layer_compute(model, cluster, row["tp"], 1, False, row["mb"], "none")
    return sum(o.seconds for o in layer.forward + layer.backward)


def k_sweep(data: dict) -> None:
    print("BF16 GEMMs of whole waves of 128x256 tiles (graphed), TFLOP/s:")
    print(f"{'m':>5s} {'n':>5s} {'k':>6s} | {'measured':>8s} {'model':>6s} {'error':>7s}")
    errors = []
    for r in data["gemm_k_sweep"]:
        pred = gemm_time(gpu_at(r["sm_clock_mhz"]), r["m"], r["n"], r["k"])
        errors.append(100 * (pred / r["seconds"] - 1))
        print(f"{r['m']:5d} {r['n']:5d} {r['k']:6d} | {r['tflops']:8.0f} {2 * r['m'] * r['n'] * r['k'] / pred / 1e12:6.0f} "
              f"{errors[-1]:+6.1f}%")
    print(f"time: mean |error| {statistics.mean(map(abs, errors)):.1f} %, signed {statistics.mean(errors):+.1f} %")


def layers(data: dict, graphed: bool) -> None:
    rows = [r for r in data["rows"] if r["graphed"] == graphed]
    print(f"\nlayer forward + backward ({'CUDA graph: the GPU alone' if graphed else 'eager: host launches included'}), "
          "ms:")
    print(f"{'hidden':>6s} {'tp':>3s} {'mb':>3s} | {'measured':>8s} {'model':>6s} {'error':>7s}")
    errors = []
    for r in rows:
        pred = layer_seconds(r)
        errors.append(100 * (pred / r["layer_fwd_bwd_s"] - 1))
        print(f"{r['hidden']:6d} {r['tp']:3d} {r['mb']:3d} | {1e3 * r['layer_fwd_bwd_s']:8.3f} {1e3 * pred:6.3f} "
              f"{errors[-1]:+6.1f}%")
    print(f"mean |error| {statistics.mean(map(abs, errors)):.1f} %, max {max(map(abs, errors)):.1f} %, signed "
          f"{statistics.mean(errors):+.1f} % ({len(errors)} layers)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the graphed layers and the GEMMs only")
    args = parser.parse_args()
    data = json.loads(MEASURED.read_text())
    tiny = data["tiny_kernel"]
    print(f"{data['gpu']}, torch {data['torch']}; 8192^3 BF16 GEMM before / after: "
          f"{data['reference_gemm_tflops']['before']:.0f} / {data['reference_gemm_tflops']['after']:.0f} TFLOP/s")
    print(f"one-element kernels back to back: {1e6 * tiny['graphed_s']:.2f} us each graphed, "
          f"{1e6 * tiny['eager_s']:.2f} us eager (the spec's kernel_overhead_us: "
          f"{1e6 * load_cluster('dgx-h100-80g', 8).gpu.kernel_overhead:.1f})\n")
    k_sweep(data)
    layers(data, graphed=True)
    if not args.quick:
        layers(data, graphed=False)


if __name__ == "__main__":
    main()
