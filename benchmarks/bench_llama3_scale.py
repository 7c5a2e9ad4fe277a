"""Llama 3 405B: does the whole-run model reproduce Meta's published scale?

Meta's numbers (Llama 3 herd paper, arXiv 2407.21783):
  * Table 4: 16,384 H100s, TP 8, CP 1, PP 16, DP 128, 16M-token batches (2,048 sequences of 8,192), 400 TFLOP/s per
    GPU (BF16 MFU ~41 %); 8,192 GPUs (DP 64) reached 430 TFLOP/s.
  * §3.4.1: 15.6T tokens of pre-training; 4M-token batches of 4,096-token sequences, 8M from 252M tokens, 16M from
    2.87T tokens. §3.3.4: "higher than 90 %" effective training time; 466 interruptions in a 54-day snapshot.
  * Llama 3.1 MODEL_CARD (meta-llama/llama-models): 30.84M H100 GPU-hours for the 405B model.

Prints autoplan's step for Meta's plan (its degrees, the best schedule autoplan finds for them) against the step
400 TFLOP/s implies (both counted with autoplan's model FLOPs per token), the run it gives for 15.6T tokens, and the
sweep's choice of GPU count for the days Meta's run implies.

    python benchmarks/bench_llama3_scale.py            # with the 1,024..16,384 sweep (~10 s CPU)
    python benchmarks/bench_llama3_scale.py --quick    # Meta's plan only
"""

from __future__ import annotations

import argparse
import math
import sys

META = {"gpus": 16384, "tflops": 400e12, "tokens": 15.6e12, "goodput": 0.9, "gpu_hours": 30.84e6, "batch": 2048}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="Meta's plan only, no sweep")
    a = ap.parse_args()
    sys.path.insert(0, ".")
    from autoplan.families.catalog import get_model
    from autoplan.search.exhaustive import search
    from autoplan.search.space import enumerate_plans, load_space
    from autoplan.search.sweep import choose, parse_counts, run_sweep
    from autoplan.search.totals import Budget, run_totals
    from autoplan.specs import load_cluster

    model, gpus = get_model("llama3-405b"), META["gpus"]
    cluster = load_cluster("dgx-h100-80g", gpus)
    # Meta's degrees; ZeRO-2-like FSDP (no re-shard after the forward, §3.3.2), sequence parallel, micro-batch 1
    space = load_space("default", {"tp": 8, "pp": 16, "cp": 1, "micro_batch": 1, "zero": 2,
                                   "sequence_parallel": True})
    plans, _ = enumerate_plans(model, gpus, space, META["batch"])
    e = search(model, cluster, plans, 1).leaderboard[0]
    flops = model.model_flops_per_token()
    meta_tps = gpus * META["tflops"] / flops
    meta_step = META["batch"] * model.seq_len / meta_tps
    err = e.metrics.step_time / meta_step - 1
    print(f"Meta's plan on {gpus:,} H100s as autoplan schedules it: {e.strategy.short()}")
    print(f"  step {e.metrics.step_time:.3f} s, {e.metrics.model_tflops_per_gpu:.0f} TFLOP/s per GPU "
          f"(MFU {100 * e.metrics.mfu:.1f} %); Meta: 400 TFLOP/s = {meta_step:.3f} s per 16M-token step; "
          f"step-time error {100 * err:+.1f} %")
    budget = Budget(tokens=META["tokens"], goodput=META["goodput"])
    t = run_totals(model, cluster, e, budget)
    meta_train = META["tokens"] / meta_tps / 86400
    print(f"  15.6T tokens: autoplan {t.train_s / 86400:.1f} days of training, {t.days:.1f} days at 90 % goodput, "
          f"{t.gpu_hours / 1e6:.2f}M GPU-hours, {t.energy_kwh / 1e6:.1f} GWh; 400 TFLOP/s implies "
          f"{meta_train:.1f} days, {meta_train / META['goodput']:.1f} at 90 %, "
          f"{gpus * meta_train * 24 / META['goodput'] / 1e6:.2f}M GPU-hours; model card: 30.84M GPU-hours "
          "(all of the 405B's training)")
    if a.quick:
        return
    deadline = math.ceil(meta_train / META["goodput"])
    base = load_cluster("dgx-h100-80g")
    sweep = run_sweep(model, base, parse_counts("1024..16384", base), load_space("default"), META["batch"],
                      budget=budget)
    for p in sweep.points:
        print(f"  sweep {p.gpus:>6,} GPUs: {p.best.strategy.short():<44} MFU {100 * p.best.metrics.mfu:4.1f} %, "
              f"{p.totals.days:6.1f} days, ${p.totals.cost_usd / 1e6:.1f}M")
    c = choose(sweep, deadline, None)
    print(f"sweep with Meta's implied {deadline}-day deadline: {c.message}")
    print(f"sweep CPU {sweep.cpu_s:.1f} s")


if __name__ == "__main__":
    main()
