"""The GB200's and GB300's fused attention, from cudnn-frontend's attention training benchmark
(cluster_specs/calibration/cudnn-attention-training.json: causal BF16, batch 2, 64 query / 8 KV heads of 128, cuDNN
9.27 on an H200, a GB200 and a GB300). No validate run sets it: each rack's rate is the H100's (dgx-h100-80g, which
one H100 measured over validate's shapes, bench_attention.py) times the speed-up the benchmark measured over the
H200 (the H100's die and power limit). This prints, per GPU and length, the measured forward and backward times, the
speed-up, the rate the benchmark's own FLOP count gives, and what the specs derive and ship: the BF16 rate and the
MXFP8 attention's forward and backward time over BF16's (``fp8_attention_fwd_ratio``, ``fp8_attention_bwd_ratio``).

Run: python benchmarks/bench_blackwell_attention.py [--quick]     (--quick: the same; the file is small)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from autoplan.hardware.microbenchmarks import (
    attention_efficiency,
    attention_speedup,
    fp8_attention_ratios,
)
from autoplan.specs import load_cluster

FILE = Path(__file__).resolve().parents[1] / "cluster_specs" / "calibration" / "cudnn-attention-training.json"
SPECS = {"GB200": "gb200-nvl72", "GB300": "gb300-nvl72"}


def tflops(row: dict) -> float:
    """TFLOP/s of the row's forward and backward: 4·b·s·(s/2)·d·heads forward, 2.5× that backward (as the model's
    ``attention_ops``)."""
    forward = 4.0 * 2 * row["seq"] * (row["seq"] / 2) * 128 * 64
    return 3.5 * forward / ((row["fwd_ms"] + row["bwd_ms"]) * 1e-3) / 1e12


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the same (the file is small)")
    ap.parse_args()
    rows = json.loads(FILE.read_text())["rows"]
    reference = {r["seq"]: r for r in rows if r["gpu"] == "H200"}
    print(f"{'GPU':6} {'dtype':5} {'tokens':>6} {'fwd ms':>7} {'bwd ms':>7} {'TFLOP/s':>8} {'over H200 BF16':>14}")
    for r in rows:
        h = reference[r["seq"]]
        speedup = (h["fwd_ms"] + h["bwd_ms"]) / (r["fwd_ms"] + r["bwd_ms"])
        print(f"{r['gpu']:6} {r['dtype']:5} {r['seq']:>6} {r['fwd_ms']:>7.3f} {r['bwd_ms']:>7.3f} {tflops(r):>8.0f} "
              f"{speedup:>14.3f}")
    h100 = load_cluster("dgx-h100-80g").gpu
    base = h100.peak_flops * h100.clock_ratio * h100.attention_efficiency / 1e12
    print(f"\nH100 (dgx-h100-80g): {base:.0f} TFLOP/s of fused attention at its sustained clock")
    for gpu, spec in SPECS.items():
        g = load_cluster(spec).gpu
        speedup = attention_speedup(rows, gpu, "H200")
        derived = attention_efficiency(g, h100, speedup)
        print(f"{spec}: speed-up {speedup:.3f} (geometric mean over lengths) -> {base * speedup:.0f} TFLOP/s, "
              f"attention_efficiency {derived:.4f} at clock_ratio {g.clock_ratio} (shipped {g.attention_efficiency})")
        fwd, bwd = fp8_attention_ratios(rows, gpu)
        print(f"  MXFP8 over BF16: forward {fwd:.3f}, backward {bwd:.3f} (shipped {g.fp8_attention_fwd_ratio}, "
              f"{g.fp8_attention_bwd_ratio})")


if __name__ == "__main__":
    main()
