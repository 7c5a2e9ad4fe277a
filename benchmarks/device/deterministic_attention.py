"""Time, on one CUDA GPU, causal attention's backward with and without deterministic algorithms
(``torch.use_deterministic_algorithms``), through PyTorch SDPA's FlashAttention-2 and cuDNN kernels, on the shapes of
Megatron-LM's CI 7B tests (``--deterministic-mode``: seq 8192, 32 heads, 8 KV groups, head dim 128; TP 4 micro-batch
2 and TP 1 micro-batch 1), and write them as one JSON file.

Transformer Engine under ``NVTE_ALLOW_NONDETERMINISTIC_ALGO=0`` runs FlashAttention-2's deterministic backward below
sm90 and cuDNN's deterministic path on sm90 (TE v1.13 ``get_attention_backend``, "Filter: Determinism").

Run: python benchmarks/device/deterministic_attention.py OUT.json
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernel_times import Clock

F = torch.nn.functional
CASES = [{"name": "tp4-mb2", "batch": 2, "heads": 8, "kv_heads": 2, "seq": 8192, "head_dim": 128},
         {"name": "tp1-mb1", "batch": 1, "heads": 32, "kv_heads": 8, "seq": 8192, "head_dim": 128},
         {"name": "tp8-mb1-s2048", "batch": 4, "heads": 8, "kv_heads": 8, "seq": 2048, "head_dim": 128}]
BACKENDS = {"flash2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def timed(clock: Clock, case: dict, backend, deterministic: bool) -> dict:
    b, h, kv, s, d = (case[k] for k in ("batch", "heads", "kv_heads", "seq", "head_dim"))
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(b, kv, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    grad = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    torch.use_deterministic_algorithms(deterministic)
    try:
        with sdpa_kernel(backend):
            run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != h)  # noqa: E731
            fwd = clock.mean(run)
            both = clock.mean(lambda: torch.autograd.grad(run(), (q, k, v), grad))
            gq = torch.autograd.grad(run(), (q,), grad)[0]
            again = torch.autograd.grad(run(), (q,), grad)[0]
    except RuntimeError as exc:
        return {"error": str(exc).splitlines()[0][:200]}
    finally:
        torch.use_deterministic_algorithms(False)
    return {"fwd_s": fwd, "fwd_bwd_s": both, "dq_bitwise_equal": bool(torch.equal(gq, again))}


def main(out: Path) -> None:
    clock = Clock(True)
    rows = []
    for second in (False, True):
        for case in CASES:
            for name, backend in BACKENDS.items():
                for det in ((False, True) if not second else (True, False)):
                    rows.append(case | {"kernel": name, "deterministic": det, "pass": 2 if second else 1}
                                | timed(clock, case, backend, det))
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
              "cudnn": torch.backends.cudnn.version(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "rows": rows}
    out.write_text(json.dumps(result, indent=1) + "\n")
    for r in rows:
        bwd = r.get("fwd_bwd_s", 0) - r.get("fwd_s", 0)
        print(r["pass"], r["name"], r["kernel"], "det" if r["deterministic"] else "   ",
              f"fwd {r.get('fwd_s', 0) * 1e3:.3f} ms bwd {bwd * 1e3:.3f} ms", r.get("dq_bitwise_equal", r.get("error")))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
