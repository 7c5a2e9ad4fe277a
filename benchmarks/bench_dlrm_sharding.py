"""How often the symbolic cost picks the fastest embedding sharding (per the simulator).

Draws random DLRM table sets (seeded), enumerates every assignment of a sharding kind to each table (placement by
the planner's hardware-free rule), simulates each with ``evaluate`` and ranks them also by the symbolic counts
(``families/dlrm/sharding.py`` ``SymbolicCost``), four ways: ``symbolic`` (hardware-free: fewest bytes sent, then fewest
looked up), ``datasheet-rates`` (the counts on the critical path at the cluster file's datasheet HBM, NVLink, NIC and
FLOP rates), ``datasheet+latency`` (plus n−1 rounds per collective at the tiers' per-hop latencies) and ``+L2 rate``
(plus L2-resident rows, by the datasheet L2 size and each table's skew, at the spec's L2 read rate). Prints the share
of sets where each pick is the simulator's fastest, the slowdown where it is not, and how close the planner (greedy
+ local search, ``sharding = auto``) comes to the enumerated optimum.
Lin et al. 2022 (arXiv 2201.07821) report picking the fastest sharding 85 % of the time.

    python benchmarks/bench_dlrm_sharding.py [--sets 40] [--tables 4] [--gpus 16] [--seed 0] [--quick]
    (--quick: 2 sets of 2 tables on 8 GPUs unless given)
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time
from dataclasses import replace

from autoplan.families.dlrm import sharding as sh
from autoplan.families.dlrm.sharding_search import allowed_kinds, search
from autoplan.sim.simulate import evaluate
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.families.dlrm.spec import EmbeddingTable
from autoplan.families.strategy import Strategy

FULL = {"sets": 40, "tables": 4, "gpus": 16}
QUICK = {"sets": 2, "tables": 2, "gpus": 8}
"""--sets/--tables/--gpus when not given: the benchmark's, and --quick's (one node)."""


def random_tables(rng: random.Random, count: int) -> tuple[EmbeddingTable, ...]:
    """Tables with log-uniform rows (1e2..5e7) and pooling (1..100), dim 128, Zipf skew in [0, 1.2]."""
    return tuple(EmbeddingTable(name=f"t{i}", rows=int(10 ** rng.uniform(2, 7.7)), dim=128,
                                pooling=round(10 ** rng.uniform(0, 2), 1), skew=round(rng.uniform(0, 1.2), 2))
                 for i in range(count))


def one_set(base, cluster, s: Strategy, tables) -> dict:
    model = replace(base, structure=replace(base.structure, tables=tables))
    ctx = sh.context(model, cluster, s)
    kinds = [allowed_kinds(ctx, i) for i in range(len(tables))]
    scored = []
    for combo in itertools.product(*kinds):
        pinned = replace(model, structure=replace(model.structure, tables=tuple(
            replace(t, sharding=k) for t, k in zip(tables, combo))))
        e = evaluate(pinned, cluster, s)
        if not e.feasible:
            continue
        pctx = sh.context(pinned, cluster, s)
        loads = search(pctx, float("inf"), local_search=False).loads
        scored.append((e.metrics.step_time, sh.symbolic_cost(pctx, loads), combo))
    best = min(scored, key=lambda x: x[0])
    gpu, nvl, outer = cluster.gpu, cluster.tiers[0], cluster.tier_spanning(s.dp)
    rates = (gpu.hbm_bandwidth, nvl.bandwidth, outer.bandwidth, gpu.peak_flops)
    latency = (outer.latency, nvl.latency)
    pick = {name: min(scored, key=key) for name, key in (
        ("symbolic", lambda x: (x[1].key, x[2])),
        ("datasheet-rates", lambda x: (x[1].seconds(*rates), x[2])),
        ("datasheet+latency", lambda x: (x[1].seconds(*rates, *latency), x[2])),
        ("+L2 rate", lambda x: (x[1].seconds(*rates, *latency, l2=gpu.l2_bandwidth), x[2])))}
    auto = evaluate(model, cluster, replace(s, sharding="auto")).metrics.step_time
    return {"plans": len(scored), "best": best[0], "picks": {k: v[0] for k, v in pick.items()}, "auto": auto}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", type=int, help=f"random table sets (default {FULL['sets']})")
    ap.add_argument("--tables", type=int, help=f"tables per set (default {FULL['tables']})")
    ap.add_argument("--gpus", type=int, help=f"data-parallel GPUs (default {FULL['gpus']})")
    ap.add_argument("--micro-batch", type=int, default=1024)
    ap.add_argument("--cluster", default="dgx-h100-80g")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help=f"unless given, {QUICK['sets']} sets of {QUICK['tables']} tables on {QUICK['gpus']} GPUs")
    a = ap.parse_args()
    for name, value in (QUICK if a.quick else FULL).items():
        if getattr(a, name) is None:
            setattr(a, name, value)
    rng = random.Random(a.seed)
    base, cluster = get_model("dlrm-criteo"), load_cluster(a.cluster, a.gpus)
    s = Strategy(dp=a.gpus, micro_batch=a.micro_batch, global_batch=a.gpus * a.micro_batch)
    t0 = time.perf_counter()
    results = [one_set(base, cluster, s, random_tables(rng, a.tables)) for _ in range(a.sets)]
    took = time.perf_counter() - t0
    plans = sum(r["plans"] for r in results)
    print(f"{a.sets} random sets of {a.tables} tables on {a.gpus} x {cluster.gpu.name}, micro-batch {a.micro_batch}; "
          f"{plans} feasible shardings simulated in {took:.1f} s")
    for name in results[0]["picks"]:
        hits = [r["picks"][name] <= r["best"] * (1 + 1e-9) for r in results]
        slow = [r["picks"][name] / r["best"] - 1 for r, h in zip(results, hits) if not h]
        mean = f"{100 * statistics.mean(slow):.1f} %" if slow else "-"
        worst = f"{100 * max(slow):.1f} %" if slow else "-"
        near = sum(r["picks"][name] <= r["best"] * 1.05 for r in results)
        print(f"  {name:<17} picks the fastest in {100 * sum(hits) / len(hits):5.1f} % of sets "
              f"(within 5 %: {100 * near / len(hits):5.1f} %); when not: mean slowdown {mean}, worst {worst}")
    gap = [r["auto"] / r["best"] - 1 for r in results]
    print(f"  planner (auto)    within {100 * max(gap):.2f} % of the enumerated optimum (mean "
          f"{100 * statistics.mean(gap):.2f} %); better in {sum(g < -1e-9 for g in gap)} sets (placement search)")


if __name__ == "__main__":
    main()
