"""Wall time and plans/s of `autoplan search --model gpt3 --gpus 1024` over the default space (the default
--workers auto, serial, and Ray with 2 workers including Ray's start), the same at 16384 GPUs, and how close
TPE gets with 10 % of the plans.

Run: python benchmarks/bench_search.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from autoplan.search.exhaustive import distinct_plans
from autoplan.search.run import run_search
from autoplan.search.space import enumerate_plans, load_space
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster


def one(gpus: int, sampler: str = "exhaustive", workers: int | None = 0, budget: int = 10**9, seed: int = 0) -> tuple[float, object, int]:
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", gpus)
    t0 = time.perf_counter()
    plans, _ = enumerate_plans(model, gpus, load_space(), 1536 * gpus // 1024)
    with tempfile.TemporaryDirectory() as tmp:
        result = run_search(model, cluster, plans, Path(tmp), sampler=sampler, budget=budget, workers=workers, seed=seed)
    return time.perf_counter() - t0, result, len(distinct_plans(cluster, plans))


def main() -> None:
    print(f"{'GPUs':>6} {'mode':<22} {'wall s':>7} {'simulated':>9} {'plans/s':>8} {'best step s':>11}  best plan")
    best = {}
    for gpus in (1024, 16384):
        for mode, workers in (("exhaustive auto", None), ("exhaustive serial", 0), ("exhaustive Ray x2", 2)):
            wall, r, distinct = one(gpus, workers=workers)
            b = r.leaderboard[0]
            best[gpus] = (b.metrics.step_time, distinct)
            print(f"{gpus:>6} {mode:<22} {wall:7.2f} {len(r.evaluations):9d} {len(r.evaluations) / wall:8.0f} "
                  f"{b.metrics.step_time:11.3f}  {b.strategy.short()}")
    step, distinct = best[1024]
    for seed in (0, 1, 2):
        budget = distinct // 10
        wall, r, _ = one(1024, sampler="tpe", budget=budget, seed=seed)
        b = r.leaderboard[0]
        print(f"{1024:>6} {f'TPE {budget} plans s{seed}':<22} {wall:7.2f} {len(r.evaluations):9d} "
              f"{len(r.evaluations) / wall:8.0f} {b.metrics.step_time:11.3f}  {b.strategy.short()} "
              f"({100 * (b.metrics.step_time / step - 1):+.1f} % vs exhaustive)")


if __name__ == "__main__":
    main()
