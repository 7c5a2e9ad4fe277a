"""Every weight-gradient GEMM that ``autoplan validate`` prices on an H100 (or H800) with gradient-accumulation
fusion, the GEMM adding into an FP32 ``main_grad`` (``compute.wgrad_output_bytes``): the input of
benchmarks/device/wgrad_accumulate.py, which times each with and without the accumulation on a GPU
(benchmarks/bench_wgrad_accumulate.py sets the model beside it). Needs no GPU.

Run: python benchmarks/device/wgrad_cases.py benchmarks/device/h100_wgrad_cases.json
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from autoplan.hardware import compute
from autoplan.errors import SpecError
from autoplan.validate import files
from autoplan.validate.transformer import run_case

HOPPER = ("H100", "H800")


def record() -> Counter:
    """(m, n, k, fp8, out_bytes) of every accumulating wgrad GEMM the H100/H800 rows price, with how many rows
    price it."""
    seen: Counter = Counter()
    gemm_time = compute.gemm_time

    def gemm(gpu, m, n, k, batch=1, fp8=False, out_bytes=compute.BF16):
        if gpu.name.startswith(HOPPER) and batch == 1 and out_bytes > compute.BF16:
            row.add((m, n, k, bool(fp8), out_bytes))
        return gemm_time(gpu, m, n, k, batch, fp8, out_bytes)

    compute.gemm_time = gemm
    try:
        for path in files.default_files():
            for case in files.load(path).get("cases", []):
                row: set = set()
                gemm_time.cache_clear()
                try:
                    run_case(case, path)
                except SpecError as exc:  # a row the kernel model cannot describe is no shape to time
                    print(f"skip {case['id']}: {exc}", file=sys.stderr)
                seen.update(row)
    finally:
        compute.gemm_time = gemm_time
    return seen


def main(out: Path) -> None:
    seen = record()
    rows = [{"m": m, "n": n, "k": k, "fp8": fp8, "out_bytes": ob, "rows": c}
            for (m, n, k, fp8, ob), c in sorted(seen.items())]
    out.write_text(json.dumps({"wgrad": rows}, indent=1) + "\n")
    print(f"{len(rows)} accumulating wgrad GEMMs -> {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
