"""Do FP8 GEMMs hold the same clock as BF16 ones under the GPU's power limit? On one GPU, the layer GEMMs of
validate's dense H100 runs, in BF16 (``torch.mm``) and tensor-scaled FP8 (``torch._scaled_mm``), timed two ways:

- burst: each shape's precisions interleaved, a few milliseconds each (how kernel_times.py and the H100 profiles
  timed them: the GPU's power controller sees the average of both precisions);
- sustained: one precision alone for ``--seconds`` (round robin over the shapes), as a training step's GEMMs run,
  timed over its second half, in the order BF16, FP8, FP8, BF16 so that warming cancels.

``nvidia-smi`` samples the SM clock and the power every 100 ms, tagged with the phase. autoplan prices FP8 and BF16
GEMMs at one sustained clock (``GPUSpec.clock_ratio``); benchmarks/bench_power_limit.py reads what this writes.

Run: python benchmarks/device/power_limit.py OUT.json [--seconds S] [--cpu]
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from cuda_timing import batch_seconds

BF16 = torch.bfloat16
F = torch.nn.functional
E4M3 = torch.float8_e4m3fn
# (what, m, n, k) of y = x·Wᵀ: forward, dgrad (m, k, n) and wgrad (k, n, m) of the largest layer GEMMs
SHAPES = [
    ("gpt3-175b tp4 qkv", 2048, 9216, 12288), ("gpt3-175b tp4 fc1", 2048, 12288, 12288),
    ("gpt3-175b tp4 proj", 2048, 12288, 3072), ("gpt3-175b tp4 fc1.wgrad", 12288, 12288, 2048),
    ("llama3-70b tp4 cp2 fc1", 4096, 14336, 8192), ("llama3-70b tp4 cp2 fc2", 4096, 8192, 7168),
    ("llama3-70b tp4 cp2 qkv", 4096, 2560, 8192), ("llama3-70b tp4 cp2 fc1.dgrad", 4096, 8192, 14336),
    ("llama3-8b tp1 fc1", 8192, 28672, 4096), ("llama3-8b tp1 fc2", 8192, 4096, 14336),
    ("square", 8192, 8192, 8192)]


def gemm(dev: str, m: int, n: int, k: int, fp8: bool):
    a = torch.randn(m, k, device=dev, dtype=BF16)
    w = torch.randn(n, k, device=dev, dtype=BF16)
    if not fp8 or dev == "cpu":
        return lambda: torch.mm(a, w.t())
    a8, w8 = a.to(E4M3), w.to(E4M3)
    one = torch.ones((), device=dev)
    return lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=BF16)


def calls_for(fn, cuda: bool, budget_s: float) -> int:
    for _ in range(2):
        fn()
    return max(3, min(200, round(budget_s / max(batch_seconds(fn, 1, cuda), 1e-7))))


def burst(fns: dict, cuda: bool) -> dict:
    """Mean seconds a call, each shape's two precisions back to back, a ~3 ms batch each."""
    out = {}
    for (name, fp8), fn in fns.items():
        n = calls_for(fn, cuda, 3e-3)
        out.setdefault(name, {})["fp8_s" if fp8 else "bf16_s"] = batch_seconds(fn, n, cuda) / n
    return out


def sustained(fns: dict, fp8: bool, seconds: float, cuda: bool, between=None) -> dict:
    """Round robin over the shapes in one precision for ``seconds``; mean seconds a call over the second half.
    ``between``, when given, runs after each shape's batch (untimed): a step's memory-bound kernels."""
    mine = {name: fn for (name, p), fn in fns.items() if p == fp8}
    counts = {name: calls_for(fn, cuda, 5e-3) for name, fn in mine.items()}
    total = {name: [0.0, 0] for name in mine}
    t0 = time.perf_counter()
    rounds = 0
    while time.perf_counter() - t0 < seconds:
        late = time.perf_counter() - t0 > seconds / 2
        for name, fn in mine.items():
            s = batch_seconds(fn, counts[name], cuda)
            if between:
                between()
            if late:
                total[name][0] += s
                total[name][1] += counts[name]
        rounds += 1
    return {"rounds": rounds, "per_call_s": {name: s / max(n, 1) for name, (s, n) in total.items()}}


ATTENTION = [  # (what, batch, seq, heads, head_dim): causal, each rank's heads
    ("gpt3-175b tp4", 1, 2048, 24, 128), ("llama3-70b tp4 cp2 chunk", 1, 4096, 16, 128),
    ("llama3-8b tp1", 1, 8192, 32, 128), ("nemotron4-15b tp2", 2, 4096, 24, 128)]


def attention(dev: str, cuda: bool, seconds: float) -> dict:
    """cuDNN's fused attention (PyTorch SDPA), forward and backward, burst and then sustained for ``seconds``."""
    if not cuda:
        return {}
    from torch.nn.attention import SDPBackend, sdpa_kernel
    fns = {}
    for name, b, s, h, d in ATTENTION:
        q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=BF16, requires_grad=True) for _ in range(3))
        g = torch.randn(b, h, s, d, device=dev, dtype=BF16)

        def step(q=q, k=k, v=v, g=g):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g)
        fns[(name, False)] = step
    out = {"shapes": [dict(zip(("name", "batch", "seq", "heads", "head_dim"), a)) for a in ATTENTION]}
    out["burst"] = {name: v["bf16_s"] for name, v in burst(fns, cuda).items()}
    out["sustained"] = sustained(fns, False, seconds, cuda)
    out["burst_after"] = {name: v["bf16_s"] for name, v in burst(fns, cuda).items()}
    return out


def main(out_path: Path, seconds: float, cpu: bool) -> None:
    cuda = torch.cuda.is_available() and not cpu
    dev = "cuda" if cuda else "cpu"
    shapes = SHAPES if cuda else [(w, 64, 64, 64) for w, *_ in SHAPES[:2]]
    fns = {(name, fp8): gemm(dev, m, n, k, fp8) for name, m, n, k in shapes for fp8 in (False, True)}
    smi, phases = None, []
    if cuda:
        log = out_path.with_name(out_path.stem + "-smi.csv").open("w")
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
                                "--format=csv,nounits", "-lms", "100"], stdout=log)
    result = {"device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
              "seconds": seconds, "shapes": [{"name": w, "m": m, "n": n, "k": k} for w, m, n, k in shapes]}

    def phase(name, fn):
        start = time.time()
        value = fn()
        phases.append({"phase": name, "start": start, "end": time.time()})
        return value

    result["burst_1"] = phase("burst_1", lambda: burst(fns, cuda))
    for i, fp8 in enumerate((False, True, True, False)):
        tag = f"sustained_{i + 1}_{'fp8' if fp8 else 'bf16'}"
        result[tag] = phase(tag, lambda: sustained(fns, fp8, seconds, cuda))
        print(tag, result[tag]["rounds"], "rounds", flush=True)
    # a step's other kernels: streaming adds over 256 MiB, ~2 ms a batch (about 40 % of the BF16 round's time)
    x = torch.ones(64 << 20 if cuda else 1024, device=dev)
    adds = lambda: [x.add_(1.0) for _ in range(6 if cuda else 1)]
    for fp8 in (False, True):
        tag = f"mixed_{'fp8' if fp8 else 'bf16'}"
        result[tag] = phase(tag, lambda: sustained(fns, fp8, seconds * 2 / 3, cuda, adds))
        print(tag, result[tag]["rounds"], "rounds", flush=True)
    result["burst_2"] = phase("burst_2", lambda: burst(fns, cuda))
    result["attention"] = phase("attention", lambda: attention(dev, cuda, seconds * 2 / 3))
    result["phases"] = phases
    if smi:
        smi.terminate()
    out_path.write_text(json.dumps(result, indent=1))
    print("wrote", out_path)


if __name__ == "__main__":
    args = sys.argv[1:]
    secs = float(args[args.index("--seconds") + 1]) if "--seconds" in args else 30.0
    main(Path(args[0]), secs, "--cpu" in args)
