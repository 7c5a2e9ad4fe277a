"""Time, on one CUDA GPU, the GEMM and attention shapes that ``autoplan validate`` prices (listed by
benchmarks/device/kernel_cases.py), plus a bandwidth and a launch sweep, and write them as one JSON file.

- GEMMs: each shape in BF16 (``torch.mm``) and FP8 (``torch._scaled_mm``, E4M3 operands, BF16 output), laid out
  as Megatron's forward linear (activation row-major, weight (n, k) row-major: cuBLASLt's TN, the only FP8 layout
  on Hopper); the mean of back-to-back calls (CUDA events around the batch, after warm-ups) on random data, in
  two passes (the second in reverse order: the spread between them is the clock's noise).
- Attention: causal SDPA through cuDNN and FlashAttention-2, forward and forward + backward (``autograd.grad``:
  no accumulation into earlier gradients).
- Memory-bound kernels: copy and add over 1 MiB to 1 GiB; host launch rate of a tiny kernel.
- A reference 8192³ BF16 and FP8 GEMM before, between and after, and ``nvidia-smi`` clocks and power sampled
  throughout, so that a reader can tell the clock the shapes ran at.

Run: python benchmarks/device/kernel_times.py CASES.json OUT.json [--limit N] [--cpu]
(--cpu --limit 3: a smoke test of the script on any machine)
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import torch

from cuda_timing import batch_seconds

F = torch.nn.functional
BF16 = torch.bfloat16


class Clock:
    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda

    def mean(self, fn, budget_s: float = 2e-3, most: int = 50) -> float:
        """Mean seconds of ``fn`` over back-to-back calls, after warm-ups; as many calls as fill ``budget_s``."""
        for _ in range(2):
            fn()
        once = batch_seconds(fn, 1, self.cuda)
        n = max(5, min(most, math.ceil(budget_s / max(once, 1e-7))))
        return batch_seconds(fn, n, self.cuda) / n


def gemm_seconds(clock: Clock, dev: str, m: int, n: int, k: int, fp8: bool) -> float | None:
    a = torch.randn(m, k, device=dev, dtype=BF16)
    w = torch.randn(n, k, device=dev, dtype=BF16)
    if not fp8:
        return clock.mean(lambda: torch.mm(a, w.t()))
    if dev == "cpu" or m % 16 or n % 16 or k % 16:
        return None
    a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
    one = torch.ones((), device=dev)
    return clock.mean(lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=BF16))


def smi_log(out_path: Path) -> subprocess.Popen:
    """nvidia-smi's SM and memory clocks, power and temperature every 100 ms, written beside ``out_path``
    (``NAME-smi.csv``) until the process is terminated."""
    log = out_path.with_name(out_path.stem + "-smi.csv").open("w")
    return subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu",
                             "--format=csv,nounits", "-lms", "100"], stdout=log)


def reference(clock: Clock, dev: str, size: int) -> dict:
    out = {"size": size, "bf16_s": gemm_seconds(clock, dev, size, size, size, False)}
    out["fp8_s"] = gemm_seconds(clock, dev, size, size, size, True)
    return out


def attention(clock: Clock, dev: str, case: dict) -> list[dict]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, s, h, d = case["batch"], case["seq"], case["heads"], case["head_dim"]
    q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=BF16, requires_grad=True) for _ in range(3))
    grad = torch.randn(b, h, s, d, device=dev, dtype=BF16)
    rows = []
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash2", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                fwd = clock.mean(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
                both = clock.mean(lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                                              (q, k, v), grad))
        except RuntimeError as exc:
            rows.append(case | {"kernel": name, "error": str(exc).splitlines()[0][:200]})
            continue
        rows.append(case | {"kernel": name, "fwd_s": fwd, "fwd_bwd_s": both})
    return rows


def memory(clock: Clock, dev: str, most: int) -> list[dict]:
    rows = []
    for p in range(20, most + 1, 2):
        n = 2**p // 2                                     # BF16 values in 2**p bytes
        x, y = torch.randn(n, device=dev, dtype=BF16), torch.randn(n, device=dev, dtype=BF16)
        rows.append({"op": "copy", "bytes": 4 * n, "s": clock.mean(lambda: x.clone())})
        rows.append({"op": "add", "bytes": 6 * n, "s": clock.mean(lambda: x + y)})
    return rows


def launch(dev: str, cuda: bool) -> float:
    x = torch.zeros(1, device=dev)
    for _ in range(100):
        x.add_(1)
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(2000):
        x.add_(1)
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / 2000


def main(cases_path: Path, out_path: Path, limit: int | None, cpu: bool) -> None:
    cuda = not cpu and torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    clock = Clock(cuda)
    cases = json.loads(cases_path.read_text())
    gemms, attn = cases["gemms"][:limit], cases["attention"][:limit]
    smi = smi_log(out_path) if cuda else None
    props = torch.cuda.get_device_properties(0) if cuda else None
    result = {"device": props.name if props else "cpu", "sm_count": props.multi_processor_count if props else 0,
              "torch": torch.__version__, "cuda": torch.version.cuda, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                            time.gmtime())}
    size = 8192 if cuda else 256
    t0 = time.time()
    result["reference_before"] = reference(clock, dev, size)
    rows = [dict(g) for g in gemms]
    for second, order in ((False, rows), (True, rows[::-1])):
        for row in order:
            tag = "_2" if second else ""
            row["t" + tag] = time.time() - t0
            row["bf16_s" + tag] = gemm_seconds(clock, dev, row["m"], row["n"], row["k"], False)
            row["fp8_s" + tag] = gemm_seconds(clock, dev, row["m"], row["n"], row["k"], True)
            if cuda:
                torch.cuda.empty_cache()
        result["reference_middle" + ("_2" if second else "")] = reference(clock, dev, size)
    result["gemms"] = rows
    print(f"{len(rows)} GEMM shapes in {time.time() - t0:.1f} s", flush=True)
    result["attention"] = [r for c in attn for r in attention(clock, dev, c)] if cuda else []
    result["memory"] = memory(clock, dev, 30 if cuda else 22)
    result["launch_s"] = launch(dev, cuda)
    result["reference_after"] = reference(clock, dev, size)
    if smi:
        smi.terminate()
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    ref = result["reference_before"], result["reference_after"]
    print("reference 8192^3 TFLOP/s bf16 before/after:",
          [round(2 * size**3 / r["bf16_s"] / 1e12) for r in ref],
          "fp8:", [round(2 * size**3 / r["fp8_s"] / 1e12) for r in ref if r["fp8_s"]])
    for r in result["attention"]:
        print("attention", r.get("kernel"), r["seq"], r["heads"], r["head_dim"], r.get("fwd_s"), r.get("fwd_bwd_s"),
              r.get("error", ""))
    print("launch us", result["launch_s"] * 1e6)


if __name__ == "__main__":
    args = sys.argv[1:]
    lim = int(args[args.index("--limit") + 1]) if "--limit" in args else None
    main(Path(args[0]), Path(args[1]), lim, "--cpu" in args)
