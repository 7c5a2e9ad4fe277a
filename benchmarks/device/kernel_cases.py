"""Every GEMM and attention shape that ``autoplan validate`` prices on an H100 (or H800, the same die): the input
of benchmarks/device/kernel_times.py, which times the same shapes on a GPU (benchmarks/bench_kernel_times.py
sets autoplan's kernel model beside what it measured). Needs no GPU.

Run: python benchmarks/device/kernel_cases.py benchmarks/device/h100_kernel_cases.json
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from autoplan.families.transformer import layer
from autoplan.hardware import compute
from autoplan.errors import SpecError
from autoplan.validate import files
from autoplan.validate.transformer import run_case

HOPPER = ("H100", "H800")


def record() -> tuple[set, set]:
    """Run every H100/H800 row of the shipped validate files with the kernel model wrapped, and return the GEMM
    shapes (m, n, k, fp8) and the attention shapes (batch, seq, heads, kv heads, head dim) it priced."""
    gemms: set = set()
    attention: set = set()
    gemm_time, attention_ops = compute.gemm_time, layer.attention_ops

    def gemm(gpu, m, n, k, batch=1, fp8=False, out_bytes=compute.BF16):
        t = gemm_time(gpu, m, n, k, batch, fp8, out_bytes)
        if gpu.name.startswith(HOPPER) and batch == 1:
            gemms.add((m, n, k, bool(fp8)))
        return t

    def attn(cluster, model, b, s_q, s_kv, heads, dropout, fused_softmax=True, fp8=False):
        fwd, bwd = attention_ops(cluster, model, b, s_q, s_kv, heads, dropout, fused_softmax, fp8)
        if cluster.gpu.name.startswith(HOPPER) and cluster.flash_attention and s_q == s_kv and not model.window:
            kv = max(1, (model.kv_heads or model.heads) * heads // model.heads)
            attention.add((b, s_q, heads, kv, model.head_dim))
        return fwd, bwd

    compute.gemm_time, layer.attention_ops = gemm, attn
    try:
        for path in files.default_files():
            for case in files.load(path).get("cases", []):
                try:
                    run_case(case, path)
                except SpecError as exc:  # a row the kernel model cannot describe is no shape to time
                    print(f"skip {case['id']}: {exc}", file=sys.stderr)
    finally:
        compute.gemm_time, layer.attention_ops = gemm_time, attention_ops
    return gemms, attention


def main(out: Path) -> None:
    gemms, attention = record()
    rows = defaultdict(list)
    for m, n, k, fp8 in sorted(gemms):
        rows["gemms"].append({"m": m, "n": n, "k": k, "fp8": fp8})
    for b, s, heads, kv, d in sorted(attention):
        rows["attention"].append({"batch": b, "seq": s, "heads": heads, "kv_heads": kv, "head_dim": d})
    out.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"{len(rows['gemms'])} GEMMs (shape and precision), {len(rows['attention'])} attention shapes -> {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
