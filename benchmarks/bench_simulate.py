"""Median wall time of one simulation (evaluate) of GPT-3 175B: TP8 PP8 DP16, micro-batch 1, global batch 1536,
1F1B, interleaved v=3 and the zero-bubble zb-h1, zbv, dualpipev and dualpipe, on 1024 GPUs; and the same plan shape (DP 256) on
16384 GPUs.

Then every fitting plan of the default space (GPT-3 on 1024 H100s), and of a space with over 500 pipeline shapes.
Cold figures clear every cache of every autoplan module first (found by ``autoplan_caches``).

Then every fitting plan of the zero-bubble space (search_spaces/zero-bubble.toml), ms per plan by schedule.

Run: python benchmarks/bench_simulate.py [--repeat N] [--batches 512,1024,...] [--zero-bubble-only]
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import statistics
import time

from autoplan.sim.simulate import evaluate
from autoplan.families.strategy import Strategy
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster


def timings_ms(fn, repeat: int) -> tuple[float, float]:
    """Median and minimum wall time in ms (the minimum is robust to a noisy shared machine)."""
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples), min(samples)


def autoplan_caches() -> list:
    """Every cache of every autoplan module (functools' and the task-graph cache): whatever has ``cache_clear``."""
    import autoplan

    found = {}
    for info in pkgutil.walk_packages(autoplan.__path__, "autoplan."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (not isinstance(obj, type) and callable(getattr(obj, "cache_clear", None))
                    and getattr(obj, "__module__", "").startswith("autoplan")):
                found[id(obj)] = obj
    return list(found.values())


def clear_caches() -> None:
    for f in CACHES:
        f.cache_clear()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--batches", default="512,1024,1536,2048", help="global batches of the many-shapes case")
    ap.add_argument("--zero-bubble-only", action="store_true",
                    help="only the single plans and the zero-bubble space (skip the default-space passes)")
    args = ap.parse_args()
    model = get_model("gpt3")
    print(f"{'GPUs':>6} {'schedule':<14} {'step (s)':>9} {'MFU':>6} {'warm median/min ms':>19} "
          f"{'cold median/min ms':>19}")
    for gpus, dp in ((1024, 16), (16384, 256)):
        cluster = load_cluster("dgx-a100-80g", gpus)
        for schedule, v in (("1f1b", 1), ("interleaved", 3), ("zb-h1", 1), ("zbv", 1), ("dualpipev", 1),
                            ("dualpipe", 1)):
            s = Strategy(dp=dp, tp=8, pp=8, micro_batch=1, global_batch=1536 * gpus // 1024, schedule=schedule,
                         virtual_stages=v, sequence_parallel=True, recompute="selective", zero=1)
            e = evaluate(model, cluster, s)
            warm = timings_ms(lambda: evaluate(model, cluster, s), args.repeat)
            cold = timings_ms(lambda: (clear_caches(), evaluate(model, cluster, s)), max(5, args.repeat // 5))
            print(f"{gpus:>6} {schedule + (f' v={v}' if v > 1 else ''):<14} {e.metrics.step_time:9.3f} "
                  f"{100 * e.metrics.mfu:5.1f}% {warm[0]:10.2f} /{warm[1]:6.2f} {cold[0]:10.2f} /{cold[1]:6.2f}")
    print("warm: op/collective and task-graph caches filled (as inside a search); cold: all cleared before each call")
    if not args.zero_bubble_only:
        whole_space(model)
        many_shapes(model, args.batches)
    zero_bubble_space(model)


def zero_bubble_space(model) -> None:
    """Every distinct fitting plan of the zero-bubble space (GPT-3, 1024 H100s) from cold caches, in the exhaustive
    search's order, with the time spent on each schedule's plans: what the zb schedules cost a search."""
    from autoplan.families.transformer.memory import peak_memory
    from autoplan.search.exhaustive import distinct_plans
    from autoplan.search.space import enumerate_plans, load_space

    cluster = load_cluster("dgx-h100-80g", 1024)
    plans, _ = enumerate_plans(model, 1024, load_space("zero-bubble"), 1536)
    fitting = [s for s in distinct_plans(cluster, plans) if peak_memory(model, cluster, s) <= cluster.gpu.hbm_bytes]
    clear_caches()
    spent: dict[str, list[float]] = {}
    for s in fitting:
        t0 = time.perf_counter()
        evaluate(model, cluster, s)
        spent.setdefault(s.schedule, []).append(time.perf_counter() - t0)
    total = sum(map(sum, spent.values()))
    print(f"zero-bubble space, GPT-3 on 1024 H100s: {len(fitting)} fitting plans in {total:.1f} s (cold caches)")
    for schedule, walls in spent.items():
        print(f"  {schedule:<12} {len(walls):5d} plans {sum(walls):6.1f} s  {1e3 * sum(walls) / len(walls):6.1f} ms per plan")


def whole_space(model) -> None:
    """Every distinct plan of the default space that fits (GPT-3, 1024 H100s), simulated once each from cold
    caches, in the exhaustive search's order: the rate a search without bound pruning would see."""
    from autoplan.families.transformer.memory import peak_memory
    from autoplan.search.exhaustive import distinct_plans
    from autoplan.search.space import enumerate_plans, load_space

    cluster = load_cluster("dgx-h100-80g", 1024)
    plans, _ = enumerate_plans(model, 1024, load_space(), 1536)
    fitting = [s for s in distinct_plans(cluster, plans) if peak_memory(model, cluster, s) <= cluster.gpu.hbm_bytes]
    clear_caches()
    t0 = time.perf_counter()
    for s in fitting:
        evaluate(model, cluster, s)
    wall = time.perf_counter() - t0
    print(f"whole default space, GPT-3 on 1024 H100s: {len(fitting)} fitting plans in {wall:.1f} s, "
          f"{1e3 * wall / len(fitting):.1f} ms per plan, {len(fitting) / wall:.0f} plans/s")


def many_shapes(model, batches: str) -> None:
    """The fitting plans of the default space with both overlap flags free (TP 8, SP, CP 1, selective or full
    recompute) for several global batches, GPT-3 on 1024 H100s: over 500 pipeline shapes, more than a 128-graph
    cache holds. A pass from cleared caches (cold), then a second pass over the same plans (warm)."""
    from autoplan.families.transformer.memory import peak_memory
    from autoplan.search.exhaustive import distinct_plans
    from autoplan.search.space import Space, enumerate_plans, load_space
    from autoplan.sim import workload

    cluster = load_cluster("dgx-h100-80g", 1024)
    space = Space({**load_space().axes, "tp": (8,), "cp": (1,), "sequence_parallel": (True,),
                   "recompute": ("selective", "full"), "overlap_grad_reduce": (True, False),
                   "overlap_param_gather": (True, False)})
    fitting = []
    for gb in map(int, batches.split(",")):
        plans, _ = enumerate_plans(model, 1024, space, gb)
        fitting += [s for s in distinct_plans(cluster, plans)
                    if peak_memory(model, cluster, s) <= cluster.gpu.hbm_bytes]
    graph, shapes = workload._graph, set()

    def recorded(shape):
        shapes.add(shape)
        return graph(shape)

    clear_caches()
    workload._graph = recorded
    try:
        walls = []
        for _ in ("cold", "warm"):
            t0 = time.perf_counter()
            for s in fitting:
                evaluate(model, cluster, s)
            walls.append(time.perf_counter() - t0)
    finally:
        workload._graph = graph
    info = graph.cache_info()
    print(f"many shapes, GPT-3 on 1024 H100s, global batches {batches}, overlap flags free: {len(fitting)} "
          f"fitting plans, {len(shapes)} pipeline shapes; graph cache {info.misses} misses, {info.hits} hits, holds {info.currsize} "
          f"of {info.maxsize} (graphs, or tasks for a size-bounded cache)")
    for name, wall in zip(("cold", "warm"), walls):
        print(f"  {name}: {wall:.1f} s, {1e3 * wall / len(fitting):.2f} ms per plan, {len(fitting) / wall:.0f} plans/s")


CACHES = autoplan_caches()

if __name__ == "__main__":
    main()
