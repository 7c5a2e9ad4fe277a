"""Time, on one CUDA GPU, cuDNN's fused causal attention backward through JAX (``jax.nn.dot_product_attention``,
``implementation="cudnn"``) in one process, and report whether its dQ repeats bitwise: run it once plain and once
with ``XLA_FLAGS=--xla_gpu_deterministic_ops=true`` to see what cuDNN's deterministic path costs (PyTorch refuses
cuDNN attention under deterministic algorithms). Shapes: Megatron-LM CI's 7B tests (seq 8192, head dim 128).

Run: python benchmarks/device/cudnn_deterministic_attention.py OUT.json
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp

CASES = [{"name": "tp4-mb2", "batch": 2, "heads": 8, "kv_heads": 2, "seq": 8192, "head_dim": 128},
         {"name": "tp1-mb1", "batch": 1, "heads": 32, "kv_heads": 8, "seq": 8192, "head_dim": 128}]


def mean_seconds(fn, *args, n: int = 20) -> float:
    for _ in range(3):
        jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    for _ in range(n):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / n


def case_row(c: dict) -> dict:
    b, h, kv, s, d = (c[k] for k in ("batch", "heads", "kv_heads", "seq", "head_dim"))
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    q = jax.random.normal(keys[0], (b, s, h, d), jnp.bfloat16)
    k = jax.random.normal(keys[1], (b, s, kv, d), jnp.bfloat16)
    v = jax.random.normal(keys[2], (b, s, kv, d), jnp.bfloat16)
    g = jax.random.normal(keys[3], (b, s, h, d), jnp.bfloat16)

    def attn(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn")

    fwd = jax.jit(attn)
    both = jax.jit(lambda q, k, v: jax.vjp(attn, q, k, v)[1](g))
    dq1, dq2 = both(q, k, v)[0], both(q, k, v)[0]
    return c | {"fwd_s": mean_seconds(fwd, q, k, v), "fwd_bwd_s": mean_seconds(both, q, k, v),
                "dq_bitwise_equal": bool(jnp.array_equal(dq1, dq2))}


def main(out: Path) -> None:
    rows = []
    for c in CASES:
        try:
            rows.append(case_row(c))
        except Exception as exc:  # a refusal is the finding
            rows.append(c | {"error": str(exc).splitlines()[0][:300]})
    result = {"device": jax.devices()[0].device_kind, "jax": jax.__version__,
              "xla_flags": os.environ.get("XLA_FLAGS", ""), "rows": rows}
    out.write_text(json.dumps(result, indent=1) + "\n")
    for r in rows:
        print(result["xla_flags"] or "default", r["name"], r.get("fwd_s"), r.get("fwd_bwd_s"),
              r.get("dq_bitwise_equal", r.get("error")))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
