"""FP8 GEMMs by scaling recipe on one GPU: BF16, tensor-wise FP8 (one scale per operand) and blockwise FP8 (1x128
activation tiles, 128x128 weight blocks: DeepSeek-V3's recipe, Megatron-LM --fp8-recipe blockwise, run by cuBLAS
through torch._scaled_mm as Transformer Engine runs it on Hopper), on the expert and layer GEMMs of MoE models and a
large square one. Each is replayed as a CUDA graph; the SM clock is read beside each row (NVML).

Compared with autoplan's GEMM model by benchmarks/bench_fp8_recipes.py; what it wrote on an H100 is
cluster_specs/calibration/h100-fp8-recipes.json.

Run: python benchmarks/device/fp8_recipes.py OUT.json
"""
import json
import sys

import torch

from cuda_timing import graph_seconds
from layer_step import BF16, DEV, reference_tflops
from small_layers import sm_clock_mhz

E4M3 = torch.float8_e4m3fn
SHAPES = [  # (what, m, n, k): the forward GEMM y = x·Wᵀ of m tokens
    ("deepseek-v3 expert fc1", 2048, 4096, 7168), ("deepseek-v3 expert fc2", 2048, 7168, 2048),
    ("deepseek-v3 expert fc1", 8192, 4096, 7168), ("deepseek-v3 expert fc2", 8192, 7168, 2048),
    ("qwen3-235b expert fc1", 2048, 3072, 4096), ("qwen3-235b expert fc2", 2048, 4096, 1536),
    ("qwen3-235b expert fc1", 512, 3072, 4096), ("grok-1 expert fc1", 4096, 65536, 6144),
    ("llama3-70b tp4 fc1", 8192, 14336, 8192), ("square", 8192, 8192, 8192)]


def _tensorwise(a, b):
    one = torch.ones((), device=DEV, dtype=torch.float32)
    return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=BF16)


def _blockwise(a, b, m: int, n: int, k: int):
    """1x128 scales for the activation (M, K/128), 128x128 for the weight (K/128, N/128); cuBLAS wants the
    activation's scales M-major (outer dim contiguous)."""
    sa = torch.ones(k // 128, m, device=DEV, dtype=torch.float32).t()
    sb = torch.ones(n // 128, k // 128, device=DEV, dtype=torch.float32).t()
    return lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=BF16)


def _rowwise(a, b, m: int, n: int):
    sa = torch.ones(m, 1, device=DEV, dtype=torch.float32)
    sb = torch.ones(1, n, device=DEV, dtype=torch.float32)
    return lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=BF16)


def measure(what: str, m: int, n: int, k: int) -> dict:
    x = torch.randn(m, k, device=DEV, dtype=BF16)
    w = torch.randn(n, k, device=DEV, dtype=BF16)
    row = dict(what=what, m=m, n=n, k=k, flops=2 * m * n * k)
    row["bf16_s"] = graph_seconds(lambda: x @ w.t())
    a, b = x.to(E4M3), w.to(E4M3).t()            # b column-major, as _scaled_mm takes it
    for name, make in (("tensorwise", lambda: _tensorwise(a, b)), ("rowwise", lambda: _rowwise(a, b, m, n)),
                       ("blockwise", lambda: _blockwise(a, b, m, n, k))):
        try:
            fn = make()
            fn()
            row[f"{name}_s"] = graph_seconds(fn)
        except Exception as exc:  # a recipe this PyTorch/cuBLAS cannot run on this GPU: recorded, not timed
            row[f"{name}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    row["sm_clock_mhz"] = sm_clock_mhz()
    return row


def main() -> None:
    before = reference_tflops()
    rows = []
    for shape in SHAPES:
        rows.append(measure(*shape))
        print(json.dumps(rows[-1]), flush=True)
    data = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda, rows=rows,
                reference_gemm_tflops=dict(before=before, after=reference_tflops()))
    with open(sys.argv[1], "w") as out:
        json.dump(data, out, indent=1)


if __name__ == "__main__":
    main()
