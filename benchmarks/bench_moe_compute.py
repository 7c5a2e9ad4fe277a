"""MoE compute fidelity figures: grouped-GEMM efficiency by tokens per expert, and the MoE validation rows.

1. Achieved BF16 efficiency (of the 989 TFLOP/s peak) of one grouped GEMM over 16 local experts on a DGX H100 as the
   tokens per expert grow, for the fc1 shapes of GPT-OSS 120B, Qwen3 30B-A3B and Qwen3 235B-A22B
   (``moe.grouped_gemm_efficiency``: one cuBLAS GEMM per expert, Transformer Engine's GroupedLinear on Hopper).
2. The Megatron-Bridge H100 MoE rows of ``autoplan validate`` (known gaps): measured and predicted step time, and
   the host's share of the predicted MoE layer (the wait after the dispatcher's sync).

Run: python benchmarks/bench_moe_compute.py [--quick]     (--quick: the MoE rows on at most 64 GPUs only)
"""

from __future__ import annotations

import argparse

from autoplan.families.transformer import moe_layer as moe
from autoplan.specs import load_cluster
from autoplan.validate import cluster_of, load, model_of, run_case

SHAPES = {"gpt-oss-120b": (5760, 2880), "qwen3-30b-a3b": (1536, 2048), "qwen3-235b-a22b": (3072, 4096)}
TOKENS = (16, 64, 256, 1024, 4096, 16384)
QUICK_GPUS = 64
"""--quick keeps the MoE rows on at most this many GPUs (GPT-OSS 120B and Qwen3 30B-A3B)."""


def grouped_table() -> None:
    gpu = load_cluster("dgx-h100-80g", 8).gpu
    print("grouped GEMM (16 experts), BF16 efficiency by tokens per expert")
    print(f"{'model fc1 (n, k)':32s}" + "".join(f"{m:>8d}" for m in TOKENS))
    for name, (n, k) in SHAPES.items():
        effs = [moe.grouped_gemm_efficiency(gpu, 16, m, n, k) for m in TOKENS]
        print(f"{name + f' ({n}, {k})':32s}" + "".join(f"{100 * e:7.1f}%" for e in effs))


def validation_rows(quick: bool = False) -> None:
    print("\nMegatron-Bridge H100 MoE rows (autoplan validate, known gaps)")
    for case in load()["cases"]:
        if not case["model"].get("experts") or (quick and case["hardware"]["num_gpus"] > QUICK_GPUS):
            continue
        r = run_case(case)
        model = model_of(case["model"])
        lay = moe.moe_layer(model, cluster_of(case["hardware"], case["hardware"]["num_gpus"]),
                            moe.layer_key(r.plan)).compute
        wait = sum(op.seconds for op in lay.forward + lay.backward if op.name.startswith("host"))
        busy = sum(op.seconds for op in lay.forward + lay.backward)
        print(f"{case['id']:48s} {r.measured:7.2f} s {r.predicted:7.2f} s {r.error_pct:+6.1f} %  "
              f"host wait {100 * wait / busy:4.1f} % of the MoE layer")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"only the MoE rows on at most {QUICK_GPUS} GPUs")
    quick = ap.parse_args().quick
    grouped_table()
    validation_rows(quick)


if __name__ == "__main__":
    main()
