"""What contention (transfers sharing links, sim/contention.py) costs and changes.

1. Per-plan cost: the headline search (GPT-3 175B on 1024 H100s, default space) run serially with contention off
   and on, CPU seconds per simulated plan (caches cold, as a search meets them); then the same plans evaluated
   again with warm caches, where the simulation is all that is left.
2. Accuracy of the first-order model against the event-driven fluid simulation, on the best plans of the search.
3. The large-pipeline A100 runs of ``autoplan validate`` (GPT 530B and 1T on Selene) with contention off, on
   (Selene's non-blocking spine) and over 2:1 and 4:1 oversubscribed spines: how much sharing links could explain
   of their predictions being too fast. A sensitivity, not a fit: nothing here changes a constant.

Run: python benchmarks/bench_contention.py [--quick]   (--quick: one axis fixed, tp = 4, and fewer plans)
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from autoplan.families.catalog import get_model
from autoplan.search.exhaustive import search
from autoplan.search.space import enumerate_plans, load_space
from autoplan.sim.contention import contend
from autoplan.sim.engine import run
from autoplan.sim.simulate import evaluate
from autoplan.sim.workload import lower
from autoplan.specs import load_cluster

CASES = ("megatron-sc21-t1-529.6b", "megatron-sc21-t1-1008.0b", "megatron-sc21-t2-ptdp-530b-560gpu",
         "megatron-sc21-t2-ptdp-530b-1120gpu", "megatron-sc21-t2-ptdp-530b-2240gpu", "sp2205-530b-fullrecompute",
         "sp2205-1t-fullrecompute")


def clear_caches() -> None:
    """Every autoplan cache (as benchmarks/bench_simulate.py finds them)."""
    import importlib
    import pkgutil

    import autoplan

    for info in pkgutil.walk_packages(autoplan.__path__, "autoplan."):
        if info.name.endswith("__main__"):
            continue
        for obj in vars(importlib.import_module(info.name)).values():
            if not isinstance(obj, type) and callable(getattr(obj, "cache_clear", None)) and \
                    getattr(obj, "__module__", "").startswith("autoplan"):
                obj.cache_clear()


def per_plan_cost(quick: bool) -> list:
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    plans, _ = enumerate_plans(model, 1024, load_space("default", {"tp": 4} if quick else {}), 1536)
    print(f"1. per-plan cost: GPT-3 175B, 1024 H100, default space{' with tp = 4' if quick else ''} "
          f"({len(plans)} valid plans), serial exact search, CPU time")
    out = {}
    for on in (False, True):
        c = cluster if on else replace(cluster, contention=False)
        clear_caches()
        t = time.process_time()
        r = search(model, c, plans, 10)
        cpu = time.process_time() - t
        out[on] = (r, cpu)
        print(f"   contention {'on ' if on else 'off'}: {cpu:6.2f} s for {len(r.evaluations)} simulated plans, "
              f"{1e3 * cpu / len(r.evaluations):6.1f} ms per plan; best {r.leaderboard[0].strategy.short()} "
              f"{r.leaderboard[0].metrics.step_time:.3f} s")
    ratio = (out[True][1] / len(out[True][0].evaluations)) / (out[False][1] / len(out[False][0].evaluations))
    print(f"   per simulated plan: {ratio:.2f}x")
    same = [e.strategy for e in out[False][0].evaluations]
    same = same[::4] if quick else same
    times = {}
    for on in (False, True):
        c = cluster if on else replace(cluster, contention=False)
        for s in same:
            evaluate(model, c, s)
        t = time.process_time()
        for s in same:
            evaluate(model, c, s)
        times[on] = time.process_time() - t
    print(f"   the same {len(same)} plans again, warm caches: off {1e3 * times[False] / len(same):.1f} ms, "
          f"on {1e3 * times[True] / len(same):.1f} ms per plan ({times[True] / times[False]:.2f}x)")
    return [e.strategy for e in out[True][0].leaderboard]


def accuracy(plans: list, quick: bool) -> None:
    model = get_model("gpt3")
    print("2. first order vs the event-driven fluid simulation (step time of the full simulated step)")
    for spine in (1.0, 4.0):
        cluster = load_cluster("dgx-h100-80g", 1024).scaled(oversubscription=spine)
        worst = 0.0
        for s in plans[:3 if quick else len(plans)]:
            alone = run(lower(model, cluster, s).tasks, lower(model, cluster, s).plan).makespan
            steps = []
            for exact in (False, True):
                lw = lower(model, cluster, s)
                steps.append(contend(lw, cluster, s, run(lw.tasks, lw.plan), exact=exact).makespan)
            worst = max(worst, abs(steps[0] / steps[1] - 1))
            print(f"   {spine:g}:1 spine  {s.short():34s} alone {alone:.4f}  first order {steps[0]:.4f}  "
                  f"event-driven {steps[1]:.4f}  ({100 * (steps[0] / steps[1] - 1):+.2f} %)")
        print(f"   largest difference: {100 * worst:.2f} %")


def a100_rows(quick: bool) -> None:
    from autoplan import validate as v

    data = v.load()
    cases = [c for c in data["cases"] if c["id"] in CASES[:3 if quick else len(CASES)]]
    print("3. large-pipeline A100 rows: predicted step time (s) by network model; error vs measured (+: too fast)")
    print(f"   {'case':38s} {'measured':>9s} {'off':>15s} {'on (1:1)':>15s} {'2:1 spine':>15s} {'4:1 spine':>15s}")
    for case in cases:
        gpus = case["hardware"]["num_gpus"]
        model, base = v.model_of(case["model"]), v.cluster_of(case["hardware"], gpus)
        plans, _ = v.plan_space(case, model, gpus)
        cols = []
        for cluster in (replace(base, contention=False), base, base.scaled(oversubscription=2),
                        base.scaled(oversubscription=4)):
            best = min((e for e in (evaluate(model, cluster, p) for p in plans) if e.feasible),
                       key=lambda e: e.metrics.step_time)
            cols.append(best.metrics.step_time)
        measured = _measured_step(case, model, gpus)
        cells = " ".join(f"{t:7.2f} ({100 * (measured / t - 1):+5.1f}%)" for t in cols)
        print(f"   {case['id']:38s} {measured:9.2f} {cells}")


def _measured_step(case: dict, model, gpus: int) -> float:
    m = case["measured"]
    if "iteration_time_s" in m:
        return float(m["iteration_time_s"])
    # SC'21 publishes hardware TFLOP/s per GPU (eq. 3, full recompute): the step time it implies
    flops = model.hardware_flops_per_iteration(case["strategy"]["global_batch"], "full")
    return flops / (float(m["tflops_per_gpu"]) * 1e12 * gpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tp fixed to 4, fewer plans and rows")
    args = ap.parse_args()
    best = per_plan_cost(args.quick)
    accuracy(best, args.quick)
    a100_rows(args.quick)


if __name__ == "__main__":
    main()
