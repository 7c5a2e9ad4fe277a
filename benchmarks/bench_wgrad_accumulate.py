"""Gradient-accumulation fusion's epilogue, timed on one H100: what adding a wgrad GEMM into ``main_grad`` costs.

With ``--gradient-accumulation-fusion`` (Megatron-LM, Transformer Engine's ``fuse_wgrad_accumulation``) a weight-
gradient GEMM adds into the gradient buffer: its epilogue reads ``main_grad`` and writes it back, 8 bytes a value
into an FP32 buffer (4 into a BF16 one) against a plain GEMM's 2. benchmarks/device/wgrad_cases.py lists every such
GEMM validate prices on H100s; benchmarks/device/wgrad_accumulate.py timed each on one H100 SXM of this project's
device machine (cluster_specs/calibration/h100-wgrad-accumulate.json, nvidia-smi's clocks and power beside it).
This prints, for the dgx-h100-80g spec:

1. the reference 8192³ BF16 GEMM before, between and after (the clock the sweep ran at);
2. per buffer: the accumulating GEMMs' time over the plain ones', measured and modelled (the spec's
   ``epilogue_exposure``, and 0: the roofline alone), by k (tokens), and the exposure the timings give
   (``microbenchmarks.epilogue_exposure``); FP8 operands writing FP32 against writing BF16 (``_scaled_mm`` has
   no accumulate: the wider write alone);
3. the unfused path (a BF16 wgrad, then one add into the buffer) against ``compute.grad_accumulation``.

Run: python benchmarks/bench_wgrad_accumulate.py [FILE] [--quick]     (--quick: the same; it takes under a second)
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from autoplan.hardware.compute import BF16, gemm_time, grad_accumulation
from autoplan.hardware.microbenchmarks import epilogue_exposure
from autoplan.specs import load_cluster

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT / "cluster_specs" / "calibration" / "h100-wgrad-accumulate.json"
SPEC = "dgx-h100-80g"


def mean(row: dict, key: str) -> float:
    return (row[key] + row[key + "_2"]) / 2


def timings(rows: list[dict], wide: str, plain: str, extra_bytes) -> list[tuple[int, int, float, float]]:
    return [(r["m"] * r["n"], extra_bytes(r), mean(r, wide), mean(r, plain)) for r in rows if wide in r]


def main(path: Path = FILE) -> None:
    data = json.loads(path.read_text())
    gpu = replace(load_cluster(SPEC, 8).gpu, speed_variability=0.0)
    bare = replace(gpu, epilogue_exposure=0.0)
    print(f"{data['device']} ({path.name}; {data['started']}, torch {data['torch']}, CUDA {data['cuda']}); model: "
          f"{SPEC} (epilogue_exposure {gpu.epilogue_exposure}, memory_efficiency {gpu.memory_efficiency})\n")
    print("1. Reference 8192^3 BF16 GEMM, TFLOP/s: " + ", ".join(
        f"{k.removeprefix('reference_')} {2 * data[k]['size'] ** 3 / data[k]['bf16_s'] / 1e12:.0f}"
        for k in ("reference_before", "reference_middle", "reference_middle_2", "reference_after") if k in data))
    rows = data["wgrad"]
    print("\n2. Accumulating wgrad GEMMs (measured: the mean of two passes; model: each GEMM's time with the "
          "accumulating epilogue over a plain BF16 write)")
    print("   buffer  k       GEMMs  plain ms  accumulate/plain: measured  model  model(0)")
    for out_bytes, name in ((8.0, "FP32"), (4.0, "BF16")):
        sel = [r for r in rows if r["out_bytes"] == out_bytes]
        by_k = defaultdict(list)
        for r in sel:
            by_k[r["k"]].append(r)
        for k, group in sorted(by_k.items()) + [("all", sel)]:
            plain = sum(mean(r, "mm_s") for r in group)
            acc = sum(mean(r, "accumulate_s") for r in group)
            model = [sum(gemm_time(g, r["m"], r["n"], r["k"], 1, False, ob) for r in group) for g in (gpu, bare)
                     for ob in (BF16, out_bytes)]
            print(f"   {name}    {k!s:6s} {len(group):5d} {plain * 1e3:9.2f}  {acc / plain:26.3f} "
                  f"{model[1] / model[0]:6.3f} {model[3] / model[2]:8.3f}")
        fit = epilogue_exposure(gpu, timings(sel, "accumulate_s", "mm_s", lambda r: r["out_bytes"] - BF16))
        print(f"   {name} buffer: the timings' exposure {fit:.3f}")
    every = timings(rows, "accumulate_s", "mm_s", lambda r: r["out_bytes"] - BF16)
    print(f"   both buffers, {len(every)} GEMMs: exposure {epilogue_exposure(gpu, every):.3f} "
          f"(the spec: {gpu.epilogue_exposure})")
    fp8 = timings(rows, "fp8_fp32_s", "fp8_bf16_s", lambda r: 2.0)
    print(f"   FP8 operands writing FP32 over writing BF16, {len(fp8)} GEMMs: time "
          f"{sum(w for *_, w, _ in fp8) / sum(p for *_, p in fp8):.3f}, exposure {epilogue_exposure(gpu, fp8):.3f}")
    print("\n3. Unfused accumulation (a BF16 wgrad, then one add into the buffer), summed")
    for out_bytes, grad_bytes, name in ((8.0, 4, "FP32"), (4.0, 2, "BF16")):
        sel = [r for r in rows if r["out_bytes"] == out_bytes]
        measured = sum(mean(r, "mm_then_add_s") - mean(r, "mm_s") for r in sel)
        model = sum(grad_accumulation(gpu, r["m"] * r["n"], grad_bytes, 1).seconds for r in sel)
        print(f"   {name} buffer, {len(sel)} adds: measured {measured * 1e3:.2f} ms, model {model * 1e3:.2f} ms "
              f"({model / measured - 1:+.1%})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=FILE, help="a wgrad_accumulate.py output")
    parser.add_argument("--quick", action="store_true", help="the same (under a second)")
    main(parser.parse_args().file)
