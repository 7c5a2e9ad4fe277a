"""FP8 and BF16 GEMMs at the GPU's 700 W power limit (benchmarks/device/power_limit.py, one H100 SXM and one H200 SXM:
cluster_specs/calibration/h100-power-limit.json and h200-power-limit.json, with nvidia-smi's clock and power beside
each in *-smi.csv). autoplan prices FP8 and BF16 GEMMs at one sustained clock, and its FP8 efficiency came from
timings taken in short bursts; a training step runs its GEMMs for seconds. This prints, per GPU:

1. the SM clock and power nvidia-smi read in each phase (burst, sustained BF16 / FP8, mixed with streaming adds);
2. per layer GEMM: TFLOP/s burst and sustained, the FP8 / BF16 time in each regime, autoplan's FP8 / BF16 time, and
   autoplan's time over the sustained one (the spec's clock is that of eight busy GPUs, so a lone GPU runs faster);
3. the ``fp8_gemm_efficiency`` at which autoplan's FP8 / BF16 time equals the sustained one, beside the spec's.

Run: python benchmarks/bench_power_limit.py [--quick]     (--quick: the same; the files are small)
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from autoplan.hardware.compute import gemm_time
from autoplan.specs import load_cluster

CALIBRATION = Path(__file__).resolve().parents[1] / "cluster_specs" / "calibration"
FILES = {"H100 SXM": CALIBRATION / "h100-power-limit.json", "H200 SXM": CALIBRATION / "h200-power-limit.json"}
SUSTAINED = {False: ("sustained_1_bf16", "sustained_4_bf16"), True: ("sustained_2_fp8", "sustained_3_fp8")}


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def sustained_s(data: dict, name: str, fp8: bool) -> float:
    """Mean seconds a call of ``name`` sustained in ``fp8`` (or BF16): the mean of its two phases."""
    return statistics.fmean(data[phase]["per_call_s"][name] for phase in SUSTAINED[fp8])


def burst_s(data: dict, name: str, fp8: bool) -> float:
    key = "fp8_s" if fp8 else "bf16_s"
    return statistics.fmean(data[phase][name][key] for phase in ("burst_1", "burst_2"))


def ratios(data: dict, regime) -> list[float]:
    """FP8 / BF16 time of every shape in one regime (``burst_s`` or ``sustained_s``)."""
    return [regime(data, s["name"], True) / regime(data, s["name"], False) for s in data["shapes"]]


def model_ratios(gpu, data: dict) -> list[float]:
    return [gemm_time(gpu, s["m"], s["n"], s["k"], fp8=True) / gemm_time(gpu, s["m"], s["n"], s["k"])
            for s in data["shapes"]]


def matching_fp8_efficiency(gpu, data: dict) -> float:
    """The ``fp8_gemm_efficiency`` at which autoplan's geometric-mean FP8 / BF16 time equals the sustained one
    (bisection: the ratio falls as the efficiency rises)."""
    target = statistics.geometric_mean(ratios(data, sustained_s))
    lo, hi = 0.3, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if statistics.geometric_mean(model_ratios(replace(gpu, fp8_gemm_efficiency=mid),
                                                                      data)) > target else (lo, mid)
    return (lo + hi) / 2


def phase_clocks(data: dict, smi: Path) -> list[tuple[str, float, float]]:
    """(phase, mean SM MHz, mean W) over each phase's second half, where the sustained phases are timed."""
    def stamp(text: str) -> float:
        return datetime.strptime(text.strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()
    rows = [(stamp(r[0]), float(r[1]), float(r[2])) for r in list(csv.reader(smi.open()))[1:]]
    out = []
    for p in data["phases"]:
        half = [(c, w) for t, c, w in rows if (p["start"] + p["end"]) / 2 <= t <= p["end"]]
        if half:
            out.append((p["phase"], statistics.fmean(c for c, _ in half), statistics.fmean(w for _, w in half)))
    return out


def report(label: str, path: Path, gpu) -> None:
    data = load(path)
    print(f"\n{label}: {data['device']}, torch {data['torch']}, {data['seconds']:.0f} s a sustained phase")
    print("  1. nvidia-smi over each phase's second half")
    for phase, mhz, watts in phase_clocks(data, path.with_name(path.stem + "-smi.csv")):
        print(f"     {phase:18s} {mhz:6.0f} MHz {watts:5.0f} W")
    print(f"  2. {'GEMM':28s} {'m':>5s} {'n':>5s} {'k':>5s} | TFLOP/s burst BF16/FP8 sustained BF16/FP8 | "
          "FP8/BF16 burst sustained autoplan | autoplan/sustained BF16 FP8")
    for s in data["shapes"]:
        name, flops = s["name"], 2.0 * s["m"] * s["n"] * s["k"]
        bb, bf, sb, sf = (fn(data, name, fp8) for fn in (burst_s, sustained_s) for fp8 in (False, True))
        mb, mf = gemm_time(gpu, s["m"], s["n"], s["k"]), gemm_time(gpu, s["m"], s["n"], s["k"], fp8=True)
        print(f"     {name:28s} {s['m']:5d} {s['n']:5d} {s['k']:5d} | {flops / bb / 1e12:9.0f} {flops / bf / 1e12:5.0f}"
              f" {flops / sb / 1e12:14.0f} {flops / sf / 1e12:5.0f} | {bf / bb:14.3f} {sf / sb:9.3f} {mf / mb:8.3f} |"
              f" {mb / sb:23.3f} {mf / sf:5.3f}")
    geo = statistics.geometric_mean
    print(f"     geometric mean FP8/BF16: burst {geo(ratios(data, burst_s)):.3f}, sustained "
          f"{geo(ratios(data, sustained_s)):.3f}, autoplan {geo(model_ratios(gpu, data)):.3f}")
    lone = [gemm_time(gpu, s["m"], s["n"], s["k"], fp8=f) / sustained_s(data, s["name"], f)
            for s in data["shapes"] for f in (False, True)]
    print(f"     autoplan over one GPU sustained alone: {geo(lone[0::2]):.3f} BF16, {geo(lone[1::2]):.3f} FP8 "
          f"(the spec's clock is eight busy GPUs')")
    matched = matching_fp8_efficiency(gpu, data)
    print(f"  3. fp8_gemm_efficiency matching the sustained FP8/BF16: {matched:.3f} "
          f"(spec {gpu.fp8_gemm_efficiency:.3f}, {100 * math.log(matched / gpu.fp8_gemm_efficiency):+.1f} %)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the same (the files are small)")
    parser.parse_args()
    gpu = load_cluster("dgx-h100-80g", 8).gpu
    for label, path in FILES.items():
        report(label, path, gpu)


if __name__ == "__main__":
    main()
