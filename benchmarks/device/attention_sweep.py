"""Fused causal attention on one GPU, the GPU's time alone: cuDNN's kernels through PyTorch SDPA, forward and forward +
backward, each replayed as a CUDA graph (no host launches in the time), over sequence length, heads, batch and head
dimension, with nvidia-smi's clock and power sampled beside. benchmarks/bench_attention.py reads what this writes;
benchmarks/device/power_limit.py times attention held at the power limit.

Run: python benchmarks/device/attention_sweep.py OUT.json [--quick]
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from cuda_timing import graph_seconds

BF16 = torch.bfloat16
F = torch.nn.functional
SEQ = (1024, 2048, 4096, 8192, 16384)
HEADS = (8, 16, 32, 64)
EXTRA = [(2, 4096, 24, 128), (4, 4096, 12, 128), (2, 8192, 8, 128), (1, 4096, 12, 192), (1, 4096, 32, 192),
         (1, 4096, 32, 160), (1, 4096, 32, 64), (1, 8192, 32, 64), (1, 32768, 8, 128)]
"""(batch, seq, heads, head_dim) beside the sweep: validate's batched shapes, Nemotron-4's 192, 160 and 64."""


def shapes(quick: bool) -> list[tuple[int, int, int, int]]:
    sweep = [(1, s, h, 128) for s in SEQ for h in HEADS if s * h <= 16384 * 32]
    return (sweep + EXTRA)[:4] if quick else sweep + EXTRA


def graphs(b: int, s: int, h: int, d: int):
    """The forward and the forward + backward of one causal attention, each captured as a CUDA graph."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=BF16, requires_grad=True) for _ in range(3))
    g = torch.randn(b, h, s, d, device="cuda", dtype=BF16)

    def fwd():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def both():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g)
    return fwd, both


def main(out_path: Path, quick: bool) -> None:
    log = out_path.with_name(out_path.stem + "-smi.csv").open("w")
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
                            "--format=csv,nounits", "-lms", "100"], stdout=log)
    rows = []
    t0 = time.time()
    for b, s, h, d in shapes(quick):
        row = {"batch": b, "seq": s, "heads": h, "head_dim": d}
        try:
            fwd, both = graphs(b, s, h, d)
            row["fwd_s"] = graph_seconds(fwd, 20)
            row["fwd_bwd_s"] = graph_seconds(both, 20)
        except RuntimeError as exc:
            row["error"] = str(exc).splitlines()[0][:200]
        rows.append(row)
        print(row, flush=True)
    smi.terminate()
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(),
           "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
           "kernel": "cudnn (PyTorch SDPA), causal, CUDA graphs", "started": t0, "rows": rows}
    out_path.write_text(json.dumps(out, indent=1))
    print("wrote", out_path)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(Path(args[0]), "--quick" in args)
