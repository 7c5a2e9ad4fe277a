"""Attention's deterministic backward, timed on one H100: what Megatron-LM's ``--deterministic-mode`` costs the
attention (Transformer Engine keeps its fused cuDNN kernel from sm90 up and runs FlashAttention-2 below).

benchmarks/device/deterministic_attention.py timed causal attention through PyTorch SDPA on one H100 SXM of this
project's device machine, with ``torch.use_deterministic_algorithms`` on and off, at the shapes of Megatron-LM's CI
7B tests (cluster_specs/calibration/h100-deterministic-attention.json); PyTorch refuses cuDNN's kernel so, and
benchmarks/device/cudnn_deterministic_attention.py timed cuDNN's through JAX with XLA's deterministic ops on and off
(h100-cudnn-deterministic-attention.json). This prints each shape's forward and backward, the backward's ratio,
and the time-weighted ratios the specs carry (``flash2_deterministic_bwd_ratio``, ``fused_deterministic_bwd_ratio``).

Run: python benchmarks/bench_deterministic_attention.py [FILE] [--quick]     (--quick: the same; under a second)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from autoplan.hardware.microbenchmarks import backward_ratio
from autoplan.specs import load_cluster

CALIBRATION = Path(__file__).resolve().parents[1] / "cluster_specs" / "calibration"
FILE = CALIBRATION / "h100-deterministic-attention.json"
CUDNN = CALIBRATION / "h100-cudnn-deterministic-attention.json"


def main(path: Path = FILE) -> None:
    data = json.loads(path.read_text())
    print(f"{data['device']} ({path.name}; {data['started']}, torch {data['torch']}, CUDA {data['cuda']}, "
          f"cuDNN {data['cudnn']})\n")
    print("shape          kernel  b  heads kv   seq  d | fwd ms default / det. | bwd ms default / det. | bwd ratio")
    for name in dict.fromkeys(r["name"] for r in data["rows"]):
        for kernel in ("flash2", "cudnn"):
            rows = [r for r in data["rows"] if r["name"] == name and r["kernel"] == kernel]
            r0 = rows[0]
            cell = {}
            for det in (False, True):
                ok = [r for r in rows if r["deterministic"] == det and "fwd_s" in r]
                cell[det] = (sum(r["fwd_s"] for r in ok) / len(ok), sum(r["fwd_bwd_s"] - r["fwd_s"] for r in ok)
                             / len(ok)) if ok else None
            shape = f"{name:14s} {kernel:6s} {r0['batch']:2d} {r0['heads']:5d} {r0['kv_heads']:2d} {r0['seq']:5d} " \
                    f"{r0['head_dim']:3d}"
            if cell[True] is None:
                error = next(r["error"] for r in rows if r["deterministic"])
                print(f"{shape} | {cell[False][0] * 1e3:9.3f} /     —    | {cell[False][1] * 1e3:9.3f} /     —    | "
                      f"refused: {error}")
                continue
            print(f"{shape} | {cell[False][0] * 1e3:9.3f} / {cell[True][0] * 1e3:7.3f}  | {cell[False][1] * 1e3:9.3f} /"
                  f" {cell[True][1] * 1e3:7.3f}  | {cell[True][1] / cell[False][1]:6.2f}")
    cudnn = json.loads(CUDNN.read_text())
    print(f"\ncuDNN through JAX {cudnn['jax']} ({CUDNN.name}; XLA_FLAGS {cudnn['xla_flags']['deterministic']} or none)")
    for name in dict.fromkeys(r["name"] for r in cudnn["rows"]):
        cell = {r["deterministic"]: r for r in cudnn["rows"] if r["name"] == name}
        bwd = {d: cell[d]["fwd_bwd_s"] - cell[d]["fwd_s"] for d in cell}
        print(f"{name:14s} cudnn  {cell[False]['batch']:2d} {cell[False]['heads']:5d} {cell[False]['kv_heads']:2d} "
              f"{cell[False]['seq']:5d} {cell[False]['head_dim']:3d} | {cell[False]['fwd_s'] * 1e3:9.3f} / "
              f"{cell[True]['fwd_s'] * 1e3:7.3f}  | {bwd[False] * 1e3:9.3f} / {bwd[True] * 1e3:7.3f}  | "
              f"{bwd[True] / bwd[False]:6.2f}  (dQ repeats bitwise: {cell[False]['dq_bitwise_equal']} / "
              f"{cell[True]['dq_bitwise_equal']})")
    gpu = load_cluster("dgx-h100-80g").gpu
    flash2, fused = backward_ratio(data["rows"], "flash2"), backward_ratio(cudnn["rows"], "cudnn-jax")
    print(f"\nTime-weighted deterministic backward / default: FlashAttention-2 {flash2:.3f} "
          f"(flash2_deterministic_bwd_ratio {gpu.flash2_deterministic_bwd_ratio}), cuDNN {fused:.3f} "
          f"(fused_deterministic_bwd_ratio {gpu.fused_deterministic_bwd_ratio})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=FILE, help="a deterministic_attention.py output")
    parser.add_argument("--quick", action="store_true", help="the same (under a second)")
    main(parser.parse_args().file)
