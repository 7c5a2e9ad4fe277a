"""Time, on one CUDA GPU, the weight-gradient GEMMs listed by benchmarks/device/wgrad_cases.py with and without
gradient-accumulation fusion's read-modify-write of ``main_grad``, and write them as one JSON file.

Laid out as Megatron's wgrad: ``main_grad[in, out] (+)= input[tokens, in]ᵀ · grad_output[tokens, out]``, both
operands token-major. Per shape, the mean of back-to-back calls (CUDA events around the batch, after warm-ups) on
random data, in two passes (the second in reverse order: the spread between them is the clock's noise):

- BF16 operands: ``mm`` writing BF16 (the model's plain GEMM); ``addmm`` into the gradient buffer, FP32 or BF16
  as the row's ``out_bytes`` says (8: FP32, 4: BF16; cuBLAS with beta = 1, the buffer read and written: what
  Transformer Engine's ``general_gemm(..., accumulate=True)`` and Megatron's ``wgrad_gemm_accum_fp32`` run);
  ``mm`` writing BF16 then one ``add_`` into the buffer (no fusion: ``compute.grad_accumulation``).
- FP8 operands (``torch._scaled_mm``, E4M3; it has no beta): writing BF16 and writing FP32.

A reference 8192³ BF16 GEMM before, between and after, and ``nvidia-smi`` clocks and power sampled throughout.

Run: python benchmarks/device/wgrad_accumulate.py CASES.json OUT.json [--limit N] [--cpu]
(--cpu --limit 3: a smoke test of the script on any machine)
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from kernel_times import Clock, gemm_seconds, smi_log

BF16, FP32, E4M3 = torch.bfloat16, torch.float32, torch.float8_e4m3fn


def bf16_seconds(clock: Clock, dev: str, row: dict) -> dict:
    m, n, k = row["m"], row["n"], row["k"]
    x = torch.randn(k, m, device=dev, dtype=BF16)
    dy = torch.randn(k, n, device=dev, dtype=BF16)
    buf = torch.zeros(m, n, device=dev, dtype=FP32 if row["out_bytes"] == 8 else BF16)
    out = {"mm_s": clock.mean(lambda: torch.mm(x.t(), dy))}
    if dev == "cpu":
        out["accumulate_s"] = clock.mean(lambda: buf.add_(torch.mm(x.t(), dy).to(buf.dtype)))
    elif buf.dtype == FP32:
        out["accumulate_s"] = clock.mean(lambda: torch.addmm(buf, x.t(), dy, out_dtype=FP32, out=buf))
    else:
        out["accumulate_s"] = clock.mean(lambda: torch.addmm(buf, x.t(), dy, out=buf))
    out["mm_then_add_s"] = clock.mean(lambda: buf.add_(torch.mm(x.t(), dy)))
    return out


def fp8_seconds(clock: Clock, dev: str, row: dict) -> dict:
    m, n, k = row["m"], row["n"], row["k"]
    if dev == "cpu" or m % 16 or n % 16 or k % 16:
        return {}
    a = torch.randn(m, k, device=dev, dtype=BF16).to(E4M3)           # inputᵀ, cast and transposed (TN: FP8's layout)
    b = torch.randn(n, k, device=dev, dtype=BF16).to(E4M3)
    one = torch.ones((), device=dev)
    return {"fp8_bf16_s": clock.mean(lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=BF16)),
            "fp8_fp32_s": clock.mean(lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=FP32))}


def main(cases_path: Path, out_path: Path, limit: int | None, cpu: bool) -> None:
    cuda = not cpu and torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    clock = Clock(cuda)
    rows = [dict(r) for r in json.loads(cases_path.read_text())["wgrad"][:limit]]
    smi = smi_log(out_path) if cuda else None
    props = torch.cuda.get_device_properties(0) if cuda else None
    result = {"device": props.name if props else "cpu", "torch": torch.__version__, "cuda": torch.version.cuda,
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    size = 8192 if cuda else 256
    ref = lambda: {"size": size, "bf16_s": gemm_seconds(clock, dev, size, size, size, False)}  # noqa: E731
    t0 = time.time()
    result["reference_before"] = ref()
    for second, order in ((False, rows), (True, rows[::-1])):
        tag = "_2" if second else ""
        for row in order:
            timed = bf16_seconds(clock, dev, row) if not row["fp8"] else fp8_seconds(clock, dev, row)
            if row["fp8"]:
                timed |= bf16_seconds(clock, dev, row)
            row.update({key + tag: s for key, s in timed.items()})
            if cuda:
                torch.cuda.empty_cache()
        result["reference_middle" + tag] = ref()
    result["wgrad"] = rows
    result["reference_after"] = ref()
    if smi:
        smi.terminate()
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{len(rows)} wgrad GEMMs in {time.time() - t0:.1f} s; reference 8192^3 bf16 TFLOP/s:",
          [round(2 * size**3 / result[k]["bf16_s"] / 1e12) for k in ("reference_before", "reference_after")])
    fp32 = [r for r in rows if r["out_bytes"] == 8]
    for name, sel in (("fp32 buffer", fp32), ("bf16 buffer", [r for r in rows if r["out_bytes"] == 4])):
        mm = sum(r["mm_s"] + r["mm_s_2"] for r in sel)
        acc = sum(r["accumulate_s"] + r["accumulate_s_2"] for r in sel)
        add = sum(r["mm_then_add_s"] + r["mm_then_add_s_2"] for r in sel)
        print(f"{name}: {len(sel)} shapes, accumulate / mm {acc / mm:.3f}, mm+add / mm {add / mm:.3f}")


if __name__ == "__main__":
    args = sys.argv[1:]
    lim = int(args[args.index("--limit") + 1]) if "--limit" in args else None
    main(Path(args[0]), Path(args[1]), lim, "--cpu" in args)
