"""autoplan's kernel model against the kernels ``autoplan validate`` prices, timed on one H100.

benchmarks/device/kernel_cases.py lists every GEMM shape (BF16 and FP8) and fused-attention shape that validate's
H100 and H800 runs price; benchmarks/device/kernel_times.py timed them on one H100 SXM of this project's device
machine (cluster_specs/calibration/h100-validate-kernels.json, with nvidia-smi's clocks and power beside it in
h100-validate-kernels-smi.csv), plus a bandwidth sweep. This prints, for the dgx-h100-80g spec:

1. the reference 8192³ GEMM before, between and after the sweeps, and the clock it implies (solved through
   ``compute.gemm_time``): the GPU throttles at its 700 W limit while the sweep runs;
2. the GEMMs: measured against the model at the spec's sustained clock, the clock that makes the two totals equal,
   the error per shape left after it (time-weighted) beside the spread between the two timed passes (the noise
   floor), by m, and the FP8 / BF16 time ratio;
3. fused causal attention (cuDNN and FlashAttention-2 through PyTorch SDPA): forward and backward TFLOP/s and the
   model's fused-attention time beside cuDNN's;
4. memory-bound kernels (copy, add): bandwidth over the spec's HBM peak, less the model's per-kernel overhead.

Run: python benchmarks/bench_kernel_times.py [FILE] [--quick]     (--quick: the same; it takes under a second)
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from autoplan.families.catalog import get_model
from autoplan.families.transformer.layer import attention_ops
from autoplan.hardware.compute import gemm_time
from autoplan.specs import load_cluster

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION = ROOT / "cluster_specs" / "calibration"
FILE = CALIBRATION / "h100-validate-kernels.json"
SPEC = "dgx-h100-80g"


def lone_gpu_cluster():
    """The spec's cluster with its GPUs timed alone: no slower GPU of a job sets their pace (``GPUSpec.pace``)."""
    cluster = load_cluster(SPEC, 8)
    return replace(cluster, gpu=replace(cluster.gpu, speed_variability=0.0))


def load(path: Path = FILE) -> dict:
    return json.loads(path.read_text())


def timed(data: dict, fp8: bool) -> list[tuple[dict, float]]:
    """(row, seconds) of every shape timed in ``fp8`` (or BF16): the mean of the two passes."""
    key = "fp8_s" if fp8 else "bf16_s"
    return [(r, (r[key] + r[key + "_2"]) / 2) for r in data["gemms"] if r[key]]


def model_seconds(gpu, rows: list[tuple[dict, float]], fp8: bool, clock: float | None = None) -> list[float]:
    g = gpu if clock is None else replace(gpu, clock_ratio=clock)
    return [gemm_time(g, r["m"], r["n"], r["k"], 1, fp8) for r, _ in rows]


def clock_matching(gpu, target: float, model_total) -> float:
    """The ``clock_ratio`` at which ``model_total(gpu)`` equals ``target`` seconds (bisection: time falls with it)."""
    lo, hi = 0.3, 2.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if model_total(replace(gpu, clock_ratio=mid)) > target else (lo, mid)
    return (lo + hi) / 2


def gemm_summary(gpu, data: dict, fp8: bool) -> dict:
    """Totals, the matching clock and the time-weighted error per shape after it, against the passes' spread."""
    rows = timed(data, fp8)
    key = "fp8_s" if fp8 else "bf16_s"
    measured = sum(t for _, t in rows)
    at_spec = sum(model_seconds(gpu, rows, fp8))
    clock = clock_matching(gpu, measured, lambda g: sum(model_seconds(g, rows, fp8)))
    fitted = model_seconds(gpu, rows, fp8, clock)
    weighted = sum(t * abs(math.log(t / p)) for (_, t), p in zip(rows, fitted)) / measured
    noise = sum(abs(math.log(r[key + "_2"] / r[key])) * t for r, t in rows) / measured / 2
    return {"shapes": len(rows), "measured_s": measured, "model_at_spec_s": at_spec, "clock": clock,
            "shape_error": weighted, "pass_spread": noise, "rows": rows, "fitted": fitted}


def attention_rows(data: dict) -> list[dict]:
    """cuDNN's and FA2's fused causal attention, with the model's forward and backward at the spec's clock (FA2 at
    its ``flash2_attention_efficiency``, as ``validate`` prices a run whose ``attention_kernel`` is flash2)."""
    cudnn = lone_gpu_cluster()
    flash2 = replace(cudnn, gpu=replace(cudnn.gpu, attention_efficiency=cudnn.gpu.flash2_attention_efficiency))
    base = get_model("llama3-8b")
    out = []
    for r in data["attention"]:
        if "error" in r:
            continue
        cluster = flash2 if r["kernel"] == "flash2" else cudnn
        model = replace(base, heads=r["heads"], kv_heads=r["kv_heads"], head_dim=r["head_dim"], seq_len=r["seq"])
        fwd, bwd = attention_ops(cluster, model, r["batch"], r["seq"], r["seq"], r["heads"], False)
        flops = fwd.flops
        out.append(r | {"flops": flops, "bwd_s": r["fwd_bwd_s"] - r["fwd_s"], "model_fwd_s": fwd.seconds,
                        "model_bwd_s": bwd.seconds})
    return out


def memory_rows(data: dict, gpu) -> list[dict]:
    return [r | {"efficiency": r["bytes"] / (r["s"] - gpu.kernel_overhead) / gpu.hbm_bandwidth}
            for r in data["memory"]]


def coverage(data: dict) -> tuple[int, int]:
    """(GEMMs validate prices on H100s now, how many of them the file timed): the sweep goes stale as rows
    are added (benchmarks/device/kernel_cases.py lists them anew)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("kernel_cases", ROOT / "benchmarks" / "device" / "kernel_cases.py")
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    gemms, _ = cases.record()
    timed = {(r["m"], r["n"], r["k"], r["fp8"]) for r in data["gemms"]}
    return len(gemms), len(gemms & timed)


def main(path: Path = FILE) -> None:
    data = load(path)
    gpu = lone_gpu_cluster().gpu
    print(f"{data['device']} ({path.name}; {data['started']}, torch {data['torch']}, CUDA {data['cuda']}); "
          f"model: {SPEC} (sustained clock {gpu.clock_ratio}, gemm_efficiency {gpu.gemm_efficiency}, "
          f"fp8_gemm_efficiency {gpu.fp8_gemm_efficiency})\n")
    print("1. Reference 8192^3 GEMM     BF16 TFLOP/s  clock   FP8 TFLOP/s  clock")
    for key in ("reference_before", "reference_middle", "reference_middle_2", "reference_after"):
        ref = data.get(key)
        if not ref:
            continue
        flops = 2.0 * ref["size"] ** 3
        cells = []
        for fp8, k in ((False, "bf16_s"), (True, "fp8_s")):
            c = clock_matching(gpu, ref[k], lambda g: gemm_time(g, ref["size"], ref["size"], ref["size"], 1, fp8))
            cells.append(f"{flops / ref[k] / 1e12:9.0f}  {c:6.3f}")
        print(f"   {key:24s} {cells[0]}   {cells[1]}")
    now, timed = coverage(data)
    distinct = len({(r["m"], r["n"], r["k"]) for r in data["gemms"]})
    print(f"\n2. GEMMs validate prices (a shape and the precision a run gives it: {len(data['gemms'])}, {distinct} "
          f"distinct shapes, each timed in both precisions; measured: the mean of two passes; {timed} of the {now} "
          "GEMMs validate prices on H100s now)")
    sums = {}
    for fp8 in (False, True):
        s = sums[fp8] = gemm_summary(gpu, data, fp8)
        print(f"   {'FP8 ' if fp8 else 'BF16'}: {s['shapes']} GEMMs, measured {s['measured_s'] * 1e3:.1f} ms, model at "
              f"the spec's clock {s['model_at_spec_s'] * 1e3:.1f} ms ({s['model_at_spec_s'] / s['measured_s'] - 1:+.1%});"
              f" totals equal at clock {s['clock']:.3f}; error per shape after it {s['shape_error']:.1%} "
              f"(time-weighted), passes' spread {s['pass_spread']:.1%}")
    ratio_measured = sums[True]["measured_s"] / sums[False]["measured_s"]
    ratio_model = sums[True]["model_at_spec_s"] / sums[False]["model_at_spec_s"]
    print(f"   FP8 / BF16 time over the shapes timed in both: measured {ratio_measured:.3f}, model {ratio_model:.3f}")
    print("\n   by m (measured over the model at the matching clock)")
    print("   m         BF16 shapes  ms      ratio |  FP8 shapes  ms      ratio")
    buckets: dict = defaultdict(dict)
    for fp8 in (False, True):
        s = sums[fp8]
        for (r, t), p in zip(s["rows"], s["fitted"]):
            b = buckets[2 ** int(math.log2(r["m"]))].setdefault(fp8, [0, 0.0, 0.0])
            b[0], b[1], b[2] = b[0] + 1, b[1] + t, b[2] + p
    for m in sorted(buckets):
        cells = []
        for fp8 in (False, True):
            n, t, p = buckets[m].get(fp8, (0, 0.0, 1.0))
            cells.append(f"{n:4d} {t * 1e3:9.2f}  {t / p if n else float('nan'):6.3f}")
        print(f"   {m:6d}    {cells[0]}  | {cells[1]}")
    print("\n3. Fused causal attention, one GPU (TFLOP/s; the model: dgx-h100-80g's attention_efficiency "
          f"{gpu.attention_efficiency}, flash2_attention_efficiency {gpu.flash2_attention_efficiency}, at its clock)")
    print("   kernel  b   seq heads kv   d |  fwd  bwd | measured ms  model ms  model/measured")
    att = attention_rows(data)
    for r in att:
        print(f"   {r['kernel']:6s} {r['batch']:2d} {r['seq']:5d} {r['heads']:4d} {r['kv_heads']:3d} {r['head_dim']:3d} |"
              f" {r['flops'] / r['fwd_s'] / 1e12:4.0f} {2.5 * r['flops'] / r['bwd_s'] / 1e12:4.0f} |"
              f" {r['fwd_bwd_s'] * 1e3:11.3f} {(r['model_fwd_s'] + r['model_bwd_s']) * 1e3:9.3f}"
              f"  {(r['model_fwd_s'] + r['model_bwd_s']) / r['fwd_bwd_s']:6.3f}")
    for kernel in ("cudnn", "flash2"):
        rows = [r for r in att if r["kernel"] == kernel]
        fwd = sum(r["model_fwd_s"] for r in rows) / sum(r["fwd_s"] for r in rows)
        bwd = sum(r["model_bwd_s"] for r in rows) / sum(r["bwd_s"] for r in rows)
        both = sum(r["model_fwd_s"] + r["model_bwd_s"] for r in rows) / sum(r["fwd_bwd_s"] for r in rows)
        print(f"   {kernel}: model over measured, summed: forward {fwd:.3f}, backward {bwd:.3f}, both {both:.3f}")
    print("\n4. Memory-bound kernels (bytes over time less the model's "
          f"{gpu.kernel_overhead * 1e6:.0f} us per kernel, over {gpu.hbm_bandwidth / 1e9:.0f} GB/s; spec "
          f"memory_efficiency {gpu.memory_efficiency})")
    for r in memory_rows(data, gpu):
        print(f"   {r['op']:4s} {r['bytes'] / 2**20:8.0f} MiB  {r['bytes'] / r['s'] / 1e9:6.0f} GB/s  "
              f"efficiency {r['efficiency']:.2f}")
    print(f"   host launch of a tiny eager kernel: {data['launch_s'] * 1e6:.1f} us (below about 32 MiB the copies and adds "
          "above are bound by it, not by HBM)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=FILE, help="a kernel_times.py output")
    parser.add_argument("--quick", action="store_true", help="the same (under a second)")
    main(parser.parse_args().file)
