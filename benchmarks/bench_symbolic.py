"""How well does the symbolic, hardware-free cost (autoplan/families/symbolic.py) rank plans, and how much does
pre-filtering by it save?

For every registered model family's cases: every distinct plan of its search space that fits is simulated
(the reference ranking) and scored symbolically with each weighting (``shape``: a byte weighs a FLOP, only the
topology's shape is kept; ``balance``: a byte over tier k weighs peak FLOP/s ÷ its bandwidth; ``launch``: balance
plus each kernel launch at the spec's kernel overhead × peak FLOP/s).
Printed per case and weighting: Kendall's τ-b between the two rankings, how many of the simulator's top 10 are
in the symbolic top 10, the symbolic rank of the simulator's best plan, and how much slower (simulated) the
symbolic best is than the true best.

Pre-filter (``autoplan search --prefilter K``, balance weights): the simulator's exact search (bound-pruned, as
``autoplan search`` runs it) on all plans and on the symbolic best K %, wall time and whether the best plan is
kept; and the same against simulating every plan (what a search without a bound, e.g. a sampler, pays).
Timings are the fastest of three runs, each with autoplan's caches emptied (as a fresh ``autoplan search``).

With ``--sampled``: Optuna's TPE with a budget of 60 plans (three seeds) on all plans and on the symbolic best
25 %: how far its best is from the true best (where no bound prunes, the pre-filter's narrowing pays).

Run: python benchmarks/bench_symbolic.py [--quick] [--sampled]
     (--quick: one small case per family, QUICK_CASES, timings of one run: a few seconds, for CI)
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

from autoplan.families.registry import FAMILIES
from autoplan.families.symbolic import symbolic_cost
from autoplan.search.exhaustive import distinct_plans, search
from autoplan.search.space import enumerate_plans, load_space
from autoplan.search.symbolic import kendall_tau, order_key, prefilter, symbolic_order, top_overlap
from autoplan.sim.simulate import evaluate
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster
from autoplan.families.registry import peak_memory

CASES: dict[str, list[tuple[str, int, str, int, str]]] = {
    "dense": [("gpt-1.7b", 64, "dgx-h100-80g", 1536, "default"), ("llama3-70b", 512, "dgx-h100-80g", 1536, "default"),
              ("gpt3", 1024, "dgx-h100-80g", 1536, "default")],
    "moe": [("mixtral-8x7b", 64, "dgx-h100-80g", 1536, "moe"), ("deepseek-v3", 256, "dgx-h800-80g", 1536, "moe")],
    "cnn": [("resnet50", 256, "dgx-h100-80g", 1536, "cnn")],
    "dlrm": [("dlrm-criteo", 64, "dgx-h100-80g", 65536, "dlrm")],
}
"""(model, GPUs, cluster, global batch, search space) per family; a new family adds its line."""
QUICK_CASES: dict[str, tuple[str, int, str, int, str, dict]] = {
    "dense": ("gpt-1.7b", 8, "dgx-h100-80g", 16, "default", {"schedule": "1f1b", "zero": 1}),
    "moe": ("qwen3-30b-a3b", 8, "dgx-h100-80g", 8, "moe", {"schedule": "1f1b"}),
    "cnn": ("resnet50", 8, "dgx-h100-80g", 16, "cnn", {"schedule": "1f1b", "recompute": "none"}),
    "dlrm": ("dlrm-criteo", 8, "dgx-h100-80g", 2048, "dlrm", {}),
}
"""--quick's case per family: one node, a small batch, some axes of the space pinned (a hundred or two plans; a
family without one here runs its first case of CASES)."""
TOP = 10
PERCENTS = (5, 10, 25)
BUDGET, SEEDS, SAMPLED_PERCENT = 60, (0, 1, 2), 25
"""The sampled search of ``--sampled``: TPE with this budget, these seeds."""


def _cold() -> None:
    """Empty every lru_cache of autoplan, so that each timed search starts as a fresh `autoplan search` does."""
    for name, module in list(sys.modules.items()):
        if name.startswith("autoplan."):
            for obj in vars(module).values():
                if callable(getattr(obj, "cache_info", None)) and not isinstance(obj, type):   # lru_cache'd
                    obj.cache_clear()


def _timed(fn, repeat: int = 3):
    """fn()'s result and its fastest wall time of ``repeat`` cold runs (the machine is shared)."""
    best = float("inf")
    for _ in range(repeat):
        _cold()
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def _fitting(model, cluster, plans):
    return [s for s in distinct_plans(cluster, plans) if peak_memory(model, cluster, s) <= cluster.gpu.hbm_bytes]


def agreement(model, cluster, plans, repeat: int = 3) -> tuple[list[str], float]:
    """Rows of τ / overlap per weighting; and the seconds per simulated plan (scoring timed ``repeat`` times)."""
    evals, seconds = _timed(lambda: [evaluate(model, cluster, s) for s in plans], repeat=1)
    per_sim = seconds / len(plans)
    feasible = [e for e in evals if e.feasible]
    sim = [e.metrics.step_time for e in feasible]
    best = min(range(len(sim)), key=lambda i: (sim[i], feasible[i].strategy.short()))
    rows = []
    for weights in ("shape", "balance", "launch"):
        sym, seconds = _timed(lambda: [symbolic_cost(model, cluster, e.strategy, weights) for e in feasible], repeat)
        per_sym = seconds / len(feasible)
        # the symbolic ranking as the search orders it (ties broken by order_key), and the tied plans
        order = sorted(range(len(sym)), key=lambda i: order_key(sym[i], feasible[i].strategy))
        rank, pick = 1 + order.index(best), order[0]
        ties = sum(x == sym[best] for x in sym) - 1
        position = {i: r for r, i in enumerate(order)}
        regret = 100 * (sim[pick] / sim[best] - 1)
        tau = kendall_tau(sym, sim)
        tau_text = "  tied" if math.isnan(tau) else f"{tau:6.3f}"      # τ-b is undefined when every score ties
        rows.append(f"| {weights:7} | {len(feasible):5} | {tau_text} | "
                    f"{top_overlap([position[i] for i in range(len(sym))], sim, TOP):2}/{TOP} | {rank:4} ({ties} tied) | {regret:6.2f} | "
                    f"{1e3 * per_sym:5.2f} | {1e3 * per_sim:5.2f} |")
    return rows, per_sim


def prefilter_rows(model, cluster, plans, per_sim: float, repeat: int = 3) -> list[str]:
    full, t_full = _timed(lambda: search(model, cluster, plans, top_k=TOP), repeat)
    best = full.leaderboard[0]
    rows = [f"| all   | {len(_fitting(model, cluster, plans)):5} | {len(full.evaluations):4} | {t_full:6.2f} | 1.00 | "
            f"{best.metrics.step_time:.4f} | yes | - |"]
    (order, _), t_score = _timed(lambda: symbolic_order(model, cluster, plans), repeat)
    for k in PERCENTS:
        def run(k=k):
            kept = prefilter(model, cluster, plans, k, keep_at_least=TOP)
            return kept, search(model, cluster, kept, top_k=TOP)
        (kept, result), t = _timed(run, repeat)
        top = result.leaderboard[0]
        # versus simulating every plan that fits: scoring all, then simulating the kept ones
        every = len(order) * per_sim / (t_score + len(kept) * per_sim)
        rows.append(f"| {k:3} % | {len(kept):5} | {len(result.evaluations):4} | {t:6.2f} | {t_full / t:4.2f} | "
                    f"{top.metrics.step_time:.4f} | {'yes' if top.strategy == best.strategy else 'NO'} | "
                    f"{every:5.1f}× |")
    return rows


def sampled_rows(model, cluster, plans, true_best: float) -> list[str]:
    """TPE with a small budget on every plan, and on the symbolic best 25 % (--prefilter 25), three seeds each."""
    from autoplan.search.run import run_search

    rows = []
    for pre in (None, SAMPLED_PERCENT):
        found, seconds = [], 0.0
        for seed in SEEDS:
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                r = run_search(model, cluster, plans, Path(tmp), sampler="tpe", budget=BUDGET, seed=seed, top_k=TOP,
                               workers=0, prefilter=pre)
                seconds += time.perf_counter() - t0
            found.append(r.leaderboard[0].metrics.step_time if r.leaderboard else float("inf"))
        gap = ", ".join(f"{100 * (x / true_best - 1):.1f}" for x in found)
        rows.append(f"| {'all plans' if pre is None else f'best {pre} %'} | {BUDGET} | {gap} | "
                    f"{sum(abs(x - true_best) < 1e-9 for x in found)}/{len(SEEDS)} | {seconds / len(SEEDS):.1f} |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one small case per family, timings of one run")
    ap.add_argument("--sampled", action="store_true", help=f"also TPE ({BUDGET} plans) with and without the pre-filter")
    ap.add_argument("--family", default=None, help="only this family's cases")
    args = ap.parse_args()
    repeat = 1 if args.quick else 3
    if args.quick:
        print("--quick: one small case per family; timings of one cold run, not the fastest of three")
    for family in sorted(FAMILIES):
        if args.family not in (None, family):
            continue
        cases = CASES.get(family)
        if not cases:
            print(f"\nfamily {family!r}: no benchmark case (add one to CASES)")
            continue
        cases = [QUICK_CASES.get(family, (*cases[0], {}))] if args.quick else [(*c, {}) for c in cases]
        for name, gpus, cluster_name, batch, space, fixed in cases:
            model, cluster = get_model(name), load_cluster(cluster_name, gpus)
            plans, _ = enumerate_plans(model, gpus, load_space(space, fixed), batch)
            fitting = _fitting(model, cluster, plans)
            pinned = "".join(f", {k} {v}" for k, v in fixed.items())
            print(f"\n**{family}: {model.name} on {gpus} × {cluster.gpu.name}, global batch {batch}, space {space!r}"
                  f"{pinned}**\n")
            print("| weights | plans | τ-b    | top-10 | rank of sim best       | regret % | ms/score | ms/sim |")
            print("|---|---|---|---|---|---|---|---|")
            rows, per_sim = agreement(model, cluster, fitting, repeat)
            print("\n".join(rows))
            print("\n| prefilter | plans | simulated | search s | speed-up | best step s | best kept | vs simulating all |")
            print("|---|---|---|---|---|---|---|---|")
            print("\n".join(prefilter_rows(model, cluster, plans, per_sim, repeat)))
            if args.sampled:
                true_best = search(model, cluster, plans, top_k=1).leaderboard[0].metrics.step_time
                print(f"\n| TPE on | budget | best found vs true best, % (seeds {', '.join(map(str, SEEDS))}) | "
                      "found the best | s per search |")
                print("|---|---|---|---|---|")
                print("\n".join(sampled_rows(model, cluster, plans, true_best)))


if __name__ == "__main__":
    main()
