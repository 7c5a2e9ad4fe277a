"""Fused causal attention by size, on one H100 (benchmarks/device/attention_sweep.py; cluster_specs/calibration/
h100-attention.json): cuDNN's kernels through PyTorch SDPA, forward and backward, each replayed as a CUDA graph (the
GPU's time alone), over sequence 1k-32k, 8-64 heads, batch 1-4 and head dimension 64-192. This prints, per shape, the
measured TFLOP/s beside autoplan's time over the measured (dgx-h100-80g: one ``attention_efficiency`` at the spec's
sustained clock), then the least-squares fit of a rate and a fixed time per call (relative error, head dimension 128)
and what is left after it. The sweep ran at 1,875-1,980 MHz; held at the power limit the same kernels ran 0-7.5 %
slower (benchmarks/bench_power_limit.py's H100 file).

Run: python benchmarks/bench_attention.py [--quick]     (--quick: the same; the file is small)
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from autoplan.specs import load_cluster

FILE = Path(__file__).resolve().parents[1] / "cluster_specs" / "calibration" / "h100-attention.json"


def flops(r: dict) -> float:
    """Forward FLOPs of one causal attention: 4·b·s·(s/2)·d·heads (the model's ``attention_ops``)."""
    return 4.0 * r["batch"] * r["seq"] * (r["seq"] / 2) * r["head_dim"] * r["heads"]


def model_seconds(gpu, r: dict) -> tuple[float, float]:
    """autoplan's forward and backward seconds of the row's attention (the flash branch of ``attention_ops``)."""
    rate = gpu.peak_flops * gpu.sustained_clock * gpu.attention_efficiency
    return flops(r) / rate + gpu.kernel_overhead, 2.5 * flops(r) / rate + gpu.kernel_overhead


def fit_rate_and_fixed(rows: list[dict], times: list[float], factor: float) -> tuple[float, float, list[float]]:
    """(FLOP/s, fixed seconds a call, relative errors) of t = factor·F/rate + fixed, least squares in relative
    error."""
    x = np.array([[factor * flops(r), 1.0] for r in rows])
    y = np.array(times)
    coef, *_ = np.linalg.lstsq(x / y[:, None], np.ones(len(y)), rcond=None)
    return 1 / coef[0], coef[1], list(100 * (x @ coef / y - 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the same (the file is small)")
    parser.parse_args()
    data = json.loads(FILE.read_text())
    gpu = load_cluster("dgx-h100-80g", 8).gpu
    rows = [r for r in data["rows"] if "fwd_s" in r]
    print(f"{data['device']}, {data['kernel']}; autoplan: attention_efficiency {gpu.attention_efficiency} at clock "
          f"{gpu.sustained_clock:.3f} = {gpu.peak_flops * gpu.sustained_clock * gpu.attention_efficiency / 1e12:.0f} "
          "TFLOP/s")
    print(f"{'b':>2s} {'seq':>6s} {'heads':>5s} {'d':>4s} | TFLOP/s fwd   bwd | autoplan/measured fwd   bwd  both")
    ratios = []
    for r in rows:
        bwd = r["fwd_bwd_s"] - r["fwd_s"]
        mf, mb = model_seconds(gpu, r)
        ratios.append((mf + mb) / r["fwd_bwd_s"])
        print(f"{r['batch']:2d} {r['seq']:6d} {r['heads']:5d} {r['head_dim']:4d} | "
              f"{flops(r) / r['fwd_s'] / 1e12:11.0f} "
              f"{2.5 * flops(r) / bwd / 1e12:5.0f} | {mf / r['fwd_s']:21.2f} {mb / bwd:5.2f} {ratios[-1]:5.2f}")
    d128 = [r for r in rows if r["head_dim"] == 128]
    own = [x for x, r in zip(ratios, rows) if r["head_dim"] == 128]
    print(f"autoplan over the head-128 shapes: mean |error| {statistics.fmean(100 * abs(x - 1) for x in own):.1f} %, "
          f"from {min(own) - 1:+.0%} to {max(own) - 1:+.0%} (short sequences too fast, long ones too slow)")
    for name, factor, times in (("forward", 1.0, [r["fwd_s"] for r in d128]),
                                ("backward", 2.5, [r["fwd_bwd_s"] - r["fwd_s"] for r in d128])):
        rate, fixed, errors = fit_rate_and_fixed(d128, times, factor)
        print(f"fit, {name}: {rate / 1e12:.0f} TFLOP/s and {fixed * 1e6:.1f} us a call; mean |error| "
              f"{statistics.fmean(abs(e) for e in errors):.1f} %, max {max(abs(e) for e in errors):.1f} %")


if __name__ == "__main__":
    main()
