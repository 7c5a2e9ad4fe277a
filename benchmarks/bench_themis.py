"""All-reduce bandwidth utilisation of the baseline and Themis schedules on multi-dimensional networks, next to the
figures Rashidi et al. report (Themis, ISCA 2022, arXiv 2110.04478), and the wall time of one schedule.

What the paper's figures are, and what they are not (read this before the table):
- Found (abstracts of arXiv v1 and the ISCA version): average and maximum gain of Themis over the baseline in
  network bandwidth utilisation of a single all-reduce, over all the paper's topologies and sizes:
  arXiv v1 (Oct 2021) 1.88x average, 2.92x max; ISCA 2022 1.72x average, 2.70x max.
- Found only in a third-party summary of the ISCA version (not the paper itself): average utilisation
  baseline 56.31 %, Themis+FIFO 87.67 % (1.58x), Themis+SCF 95.14 % (1.72x).
- NOT found through the search tools: the paper's table of target systems (per-dimension sizes, topologies,
  bandwidths) and its per-topology bars. The topologies below are therefore OUR reconstruction in the paper's
  style (2D/3D/4D; six with bandwidth falling outwards, three with equal bandwidth per dimension; 0.5 us per step
  as in ASTRA-sim's analytical samples), not the paper's. Only averages and maxima can be set side by side, and
  those depend on which topologies are averaged: the comparison is a plausibility check, not a validation.

End to end (second section): the exhaustive search of the default space with every plan's collective_policy set to
nccl, baseline and themis (GPT-3 175B on 1024 H100s, GPT-3 175B on 256 A100s, and the same H100 cluster with
hypothetical 2x and 4x faster NICs, built here with dataclasses.replace, the ClusterSpec schema unchanged): the
best plan's step time per policy, whether the best plan changes, and the time per simulated plan.

Run: python benchmarks/bench_themis.py [--chunks 64] [--section collectives|e2e|all]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from autoplan.cost.dims import dims_of, make_dims
from autoplan.cost.themis import collective
from autoplan.search.exhaustive import search
from autoplan.search.space import enumerate_plans, load_space
from autoplan.specs import get_model, load_cluster
from autoplan.sim.simulate import evaluate
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.strategy import Strategy

PAPER = {"arXiv v1 (2021)": (1.88, 2.92), "ISCA 2022": (1.72, 2.70)}
PAPER_UTIL = {"baseline": 0.5631, "themis+fifo": 0.8767, "themis+scf": 0.9514}
SIZES = {"64 MiB": 64 * 2**20, "256 MiB": 256 * 2**20, "1 GiB": 2**30}
LAT = 0.5  # µs per step

TOPOLOGIES = {
    "2D FC8 x SW128 (300/25 GB/s)": ([8, 128], ["fully_connected", "switch"], [300, 25]),
    "2D R16 x SW64 (200/50)": ([16, 64], ["ring", "switch"], [200, 50]),
    "3D R2 x FC8 x SW64 (200/100/50)": ([2, 8, 64], ["ring", "fully_connected", "switch"], [200, 100, 50]),
    "3D SW8 x SW8 x SW16 (300/100/25)": ([8, 8, 16], ["switch"] * 3, [300, 100, 25]),
    "4D R2 x FC8 x R8 x SW8 (250/200/100/50)": ([2, 8, 8, 8], ["ring", "fully_connected", "ring", "switch"],
                                                [250, 200, 100, 50]),
    "4D SW4 x SW4 x SW8 x SW8 (400/200/100/50)": ([4, 4, 8, 8], ["switch"] * 4, [400, 200, 100, 50]),
    "2D R32 x R32 torus (100/100)": ([32, 32], ["ring", "ring"], [100, 100]),
    "3D SW8 x SW8 x SW16 (100/100/100)": ([8, 8, 16], ["switch"] * 3, [100, 100, 100]),
    "4D R4 x FC8 x R8 x SW4 (100 each)": ([4, 8, 8, 4], ["ring", "fully_connected", "ring", "switch"], [100] * 4),
}


def networks() -> dict[str, tuple]:
    """Our paper-style topologies, then today's clusters as autoplan derives them from their tiers."""
    nets = {name: make_dims(s, t, b, [LAT] * len(s)) for name, (s, t, b) in TOPOLOGIES.items()}
    for cluster, gpus in (("dgx-h100-80g", 16), ("dgx-h100-80g", 1024), ("dgx-a100-80g", 64)):
        nets[f"{cluster} x {gpus} (cluster tiers)"] = dims_of(load_cluster(cluster, gpus))
    return nets


def faster_nics(cluster: ClusterSpec, factor: float) -> ClusterSpec:
    """``cluster`` with every tier beyond the first ``factor`` times faster (hypothetical NICs)."""
    tiers = (cluster.tiers[0],) + tuple(replace(t, bandwidth=t.bandwidth * factor) for t in cluster.tiers[1:])
    return replace(cluster, tiers=tiers, name=f"{cluster.name} NICs x{factor:g}")


def end_to_end() -> None:
    """Best plan per collective policy of the exhaustive search over the default space."""
    print("\nEnd to end: exhaustive search of the default space, every plan with the given collective_policy\n")
    head = (f"{'model, cluster':40} {'policy':8} {'best step s':>11} {'vs nccl':>8} {'simulated':>9} {'ms/plan':>8}  "
            "best plan")
    print(head + "\n" + "-" * len(head))
    h100 = load_cluster("dgx-h100-80g", 1024)
    cases = [("gpt3", h100, 1536), ("gpt3", load_cluster("dgx-a100-80g", 256), 512),
             ("gpt3", faster_nics(h100, 2), 1536), ("gpt3", faster_nics(h100, 4), 1536),
             ("gpt-1.7b", h100, 1024), ("gpt-1.7b", faster_nics(h100, 4), 1024)]
    for name, cluster, batch in cases:
        model = get_model(name)
        plans, _ = enumerate_plans(model, cluster.gpus, load_space(), batch)
        best = {}
        for p in ("nccl", "baseline", "themis"):
            t0 = time.perf_counter()
            r = search(model, cluster, [replace(s, collective_policy=p) for s in plans], top_k=10)
            wall = time.perf_counter() - t0
            b = r.leaderboard[0]
            best[p] = b
            label = f"{name} {cluster.name} x{cluster.gpus}"
            print(f"{label:40} {p:8} {b.metrics.step_time:11.4f} {b.metrics.step_time / best['nccl'].metrics.step_time:7.3f}x "
                  f"{len(r.evaluations):9d} {wall / max(1, len(r.evaluations)) * 1e3:8.2f}  {b.strategy.short()}")
        plan = {p: replace(e.strategy, collective_policy="nccl") for p, e in best.items()}
        print(f"{'':40} best plan: baseline {'=' if plan['baseline'] == plan['nccl'] else 'CHANGES vs'} nccl, "
              f"themis {'=' if plan['themis'] == plan['baseline'] else 'CHANGES vs'} baseline; themis/baseline "
              f"step {best['themis'].metrics.step_time / best['baseline'].metrics.step_time:.4f}x")


def fixed_plan() -> None:
    """A DP-only plan (8 members per node, 128 nodes): where the NVLink and NIC dimensions both carry load."""
    print("\nOne plan, gpt-1.7b tp1 pp1 dp1024 z1 on 1024 H100s: step time per policy\n")
    head = f"{'cluster':28} {'overlap':>7} {'nccl s':>8} {'baseline s':>10} {'themis s':>8} {'base/themis':>11}"
    print(head + "\n" + "-" * len(head))
    model, h100 = get_model("gpt-1.7b"), load_cluster("dgx-h100-80g", 1024)
    for cluster in (h100, faster_nics(h100, 2), faster_nics(h100, 4)):
        for overlap in (True, False):
            s = Strategy(dp=1024, global_batch=1024, zero=1, overlap_grad_reduce=overlap,
                         overlap_param_gather=overlap)
            t = {p: evaluate(model, cluster, replace(s, collective_policy=p)).metrics.step_time
                 for p in ("nccl", "baseline", "themis")}
            print(f"{cluster.name:28} {str(overlap):>7} {t['nccl']:8.4f} {t['baseline']:10.4f} {t['themis']:8.4f} "
                  f"{t['baseline'] / t['themis']:10.3f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=64)
    ap.add_argument("--section", choices=("collectives", "e2e", "all"), default="all")
    args = ap.parse_args()
    print(__doc__.split("Run:")[0].rstrip())
    if args.section != "e2e":
        collectives_table(chunks)
    if args.section != "collectives":
        fixed_plan()
        end_to_end()


def collectives_table(chunks: int) -> None:
    """Bandwidth utilisation of baseline and Themis all-reduces on the paper-style topologies."""
    print(f"\nall-reduce, {chunks} chunks; BW utilisation = bytes sent per GPU / (time x sum of dimension "
          "bandwidths); gain = Themis / baseline\n")
    head = f"{'network':46} {'size':>8} {'base':>6} {'T+FIFO':>7} {'T+SCF':>6} {'gain FIFO':>9} {'gain SCF':>8}"
    print(head + "\n" + "-" * len(head))
    gains = {"fifo": [], "scf": []}
    utils = {"baseline": [], "fifo": [], "scf": []}
    paper_style = set(TOPOLOGIES)
    for name, dims in networks().items():
        for label, size in SIZES.items():
            base = collective(dims, "all_reduce", size, policy="baseline", chunks=chunks)
            row = [base.bandwidth_utilisation]
            for intra in ("fifo", "scf"):
                row.append(collective(dims, "all_reduce", size, policy="themis", chunks=chunks,
                                      intra=intra).bandwidth_utilisation)
            if name in paper_style:
                utils["baseline"].append(row[0])
                for intra, u in zip(("fifo", "scf"), row[1:]):
                    utils[intra].append(u)
                    gains[intra].append(u / row[0])
            print(f"{name:46} {label:>8} {row[0]:6.1%} {row[1]:7.1%} {row[2]:6.1%} "
                  f"{row[1] / row[0]:8.2f}x {row[2] / row[0]:7.2f}x")
    print("\nSide by side (averages over our nine paper-style topologies x three sizes; the paper's are over its own):")
    print(f"{'':28} {'avg gain':>9} {'max gain':>9} {'avg base util':>14} {'avg Themis util':>16}")
    for paper, (avg, mx) in PAPER.items():
        print(f"{'paper, ' + paper:28} {avg:8.2f}x {mx:8.2f}x {'':>14} {'':>16}")
    print(f"{'paper (3rd-party summary)':28} {'1.58x/1.72x':>9} {'':>9} {PAPER_UTIL['baseline']:14.1%} "
          f"{PAPER_UTIL['themis+fifo']:7.1%}/{PAPER_UTIL['themis+scf']:.1%}")
    for intra in ("fifo", "scf"):
        g = gains[intra]
        print(f"{'ours, Themis+' + intra.upper():28} {statistics.mean(g):8.2f}x {max(g):8.2f}x "
              f"{statistics.mean(utils['baseline']):14.1%} {statistics.mean(utils[intra]):16.1%}")
    isca = PAPER["ISCA 2022"][0]
    ours = statistics.mean(gains["scf"])
    print(f"\nours (SCF) vs ISCA average gain: {ours:.2f}x vs {isca:.2f}x ({ours / isca - 1:+.0%}); the issue's target "
          "is within 15 % per topology, which needs the paper's per-topology figures (not found).")
    dims = networks()["4D SW4 x SW4 x SW8 x SW8 (400/200/100/50)"]
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        collective(dims, "all_reduce", 2**30, policy="themis", chunks=chunks, intra="scf")
        samples.append((time.perf_counter() - t0) * 1e3)
    print(f"wall time of one 4D Themis all-reduce schedule ({chunks} chunks, both schedules simulated): "
          f"median {statistics.median(samples):.1f} ms")


if __name__ == "__main__":
    main()
