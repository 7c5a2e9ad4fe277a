"""Small kernels on one GPU: the layers of vTrain's single-node GPTs (hidden 1024 and 2048, 16 heads, sequence 1024,
GeLU) at TP 1-8 and micro-batch 1-8, eager and replayed as CUDA graphs; one-element kernels back to back (the
per-kernel launch-and-tail time, graphed, and the eager host's per-op time); and BF16 GEMMs of whole waves of
128x256 tiles at K 128-16384 (how a GEMM's rate grows with K). The SM clock is read beside each row (NVML).

Compared with autoplan's layer and GEMM models by benchmarks/bench_small_layers.py; what it wrote on an H100 is
cluster_specs/calibration/h100-small-layers.json.

Run: python benchmarks/device/small_layers.py OUT.json
"""
import json
import sys

import torch

from cuda_timing import graph_seconds, mean_seconds
from layer_step import BF16, DEV, measure, reference_tflops

HIDDEN = (1024, 2048)
TP = (1, 2, 4, 8)
MICRO_BATCH = (1, 2, 4, 8)
K_SWEEP = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
WAVE_SHAPES = ((1536, 2816), (3072, 5632))
"""(m, n) of exactly 1 and 4 waves of 128x256 tiles on 132 SMs (12x11 and 24x22 tiles)."""


def sm_clock_mhz() -> int:
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM)
    except Exception:  # NVML absent: the clock is not recorded
        return 0


def tiny_kernels(count: int = 200) -> dict:
    """Seconds per one-element in-place add, ``count`` back to back: graphed (the GPU's launch and tail per
    kernel) and eager (the host's per-op dispatch where it binds)."""
    x = torch.zeros(1, device=DEV)

    def adds() -> None:
        for _ in range(count):
            x.add_(1.0)

    return dict(kernels=count, graphed_s=graph_seconds(adds, 20) / count, eager_s=mean_seconds(adds, 20) / count)


def k_sweep() -> list[dict]:
    rows = []
    for m, n in WAVE_SHAPES:
        for k in K_SWEEP:
            a = torch.randn(m, k, device=DEV, dtype=BF16)
            b = torch.randn(k, n, device=DEV, dtype=BF16)
            t = graph_seconds(lambda: a @ b, 50)
            rows.append(dict(m=m, n=n, k=k, seconds=t, tflops=2 * m * n * k / t / 1e12, sm_clock_mhz=sm_clock_mhz()))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def layers() -> list[dict]:
    rows = []
    for h in HIDDEN:
        for tp in TP:
            for mb in MICRO_BATCH:
                for graphed in (False, True):
                    row = measure(f"vtrain-h{h}", h, 16, 16, 4 * h, 1024, tp, mb, False, graphed=graphed)
                    rows.append(dict(row, sm_clock_mhz=sm_clock_mhz()))
                    print(json.dumps(rows[-1]), flush=True)
                torch.cuda.empty_cache()
    return rows


def main() -> None:
    before = reference_tflops()
    data = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, tiny_kernel=tiny_kernels(),
                gemm_k_sweep=k_sweep(), rows=layers())
    data["reference_gemm_tflops"] = dict(before=before, after=reference_tflops())
    print(json.dumps(data["tiny_kernel"]), json.dumps(data["reference_gemm_tflops"]))
    with open(sys.argv[1], "w") as out:
        json.dump(data, out, indent=1)


if __name__ == "__main__":
    main()
