"""What a sweep over GPU counts costs against one search (issue: a 7-point sweep within 3x one search).

Prints, in CPU seconds (``time.process_time`` inside a fresh process, and the children's rusage for whole
commands; the machine is shared, so wall clock is printed but not trusted):
  * one search per count as ``autoplan search`` runs it (enumerate the space, exact top-10 search), each in a fresh
    process, and their mean; and the same with the sweep's top 1, to show what sharing one process saves;
  * the sweep of all counts in one process (``search/sweep.py``: exact best per count, shared caches);
  * with the full mode, the two commands end to end: ``autoplan search`` (one count, its run folder and report)
    and ``autoplan sweep`` (every count, its folder and report).

    python benchmarks/bench_sweep.py            # llama3-405b, 256..16384 (7 counts), global batch 2048
    python benchmarks/bench_sweep.py --quick    # llama3-70b, 256..1024 (3 counts), no commands
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time

SINGLE = """
import json, sys, time
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster
from autoplan.search.space import enumerate_plans, load_space
from autoplan.search.exhaustive import search
model, gpus, batch, top = get_model(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
t0, w0 = time.process_time(), time.perf_counter()
plans, _ = enumerate_plans(model, gpus, load_space("default"), batch)
result = search(model, load_cluster("dgx-h100-80g", gpus), plans, top)
print(json.dumps({"cpu": time.process_time() - t0, "wall": time.perf_counter() - w0,
                  "best": result.leaderboard[0].strategy.short(), "simulated": len(result.evaluations)}))
"""

SWEEP = """
import json, sys, time
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster
from autoplan.search.space import load_space
from autoplan.search.sweep import parse_counts, run_sweep
model, batch = get_model(sys.argv[1]), int(sys.argv[3])
cluster = load_cluster("dgx-h100-80g")
t0, w0 = time.process_time(), time.perf_counter()
sweep = run_sweep(model, cluster, parse_counts(sys.argv[2], cluster), load_space("default"), batch)
print(json.dumps({"cpu": time.process_time() - t0, "wall": time.perf_counter() - w0,
                  "points": [[p.gpus, p.best.strategy.short() if p.best else None, round(p.cpu_s, 2), p.simulated]
                             for p in sweep.points]}))
"""


def _python(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _command(args: list[str]) -> tuple[float, float]:
    """CPU and wall seconds of an ``autoplan`` command (children's rusage: the whole process, imports too)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "autoplan", *args], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, time.perf_counter() - w0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="llama3-70b on 3 counts, no whole commands")
    ap.add_argument("--repeat", type=int, default=1, help="repeat each measurement (the minimum is kept)")
    a = ap.parse_args()
    model, counts, batch = ("llama3-70b", "256..1024", 1024) if a.quick else ("llama3-405b", "256..16384", 2048)
    sys.path.insert(0, ".")
    from autoplan.search.sweep import parse_counts
    from autoplan.specs import load_cluster

    gpus = parse_counts(counts, load_cluster("dgx-h100-80g"))
    print(f"{model}, counts {gpus}, global batch {batch}, dgx-h100-80g; CPU seconds (min of {a.repeat})")
    singles, firsts = {}, {}
    for g in gpus:
        runs = [_python(SINGLE, model, str(g), str(batch), "10") for _ in range(a.repeat)]
        singles[g] = min(runs, key=lambda r: r["cpu"])
        firsts[g] = min((_python(SINGLE, model, str(g), str(batch), "1") for _ in range(a.repeat)),
                        key=lambda r: r["cpu"])
        print(f"  search {g:>6} GPUs: {singles[g]['cpu']:6.2f} s CPU ({singles[g]['wall']:6.2f} s wall), "
              f"{singles[g]['simulated']:4} simulated, best {singles[g]['best']}; top 1 alone: "
              f"{firsts[g]['cpu']:.2f} s CPU, {firsts[g]['simulated']} simulated")
    sweeps = [_python(SWEEP, model, counts, str(batch)) for _ in range(a.repeat)]
    sweep = min(sweeps, key=lambda r: r["cpu"])
    for g, best, cpu, simulated in sweep["points"]:
        same = "" if best == singles[g]["best"] else f"  (search's best: {singles[g]['best']})"
        print(f"  sweep  {g:>6} GPUs: {cpu:6.2f} s CPU, {simulated:4} simulated, best {best}{same}")
    mean = statistics.mean(r["cpu"] for r in singles.values())
    total = sum(r["cpu"] for r in singles.values())
    alone = sum(r["cpu"] for r in firsts.values())
    print(f"one search, mean over the counts: {mean:.2f} s CPU; {len(gpus)} searches: {total:.2f} s CPU; "
          f"{len(gpus)} top-1 searches in fresh processes: {alone:.2f} s CPU")
    print(f"sweep of {len(gpus)} counts: {sweep['cpu']:.2f} s CPU ({sweep['wall']:.2f} s wall) = "
          f"{sweep['cpu'] / mean:.2f}x one search, {sweep['cpu'] / total:.2f}x the {len(gpus)} searches")
    if a.quick:
        return
    with tempfile.TemporaryDirectory() as out:
        mid = gpus[len(gpus) // 2]
        search_cpu = min(_command(["search", "--model", model, "--gpus", str(mid), "--global-batch", str(batch),
                                   "--workers", "0", "--out", out])[0] for _ in range(a.repeat))
        sweep_runs = [_command(["sweep", "--model", model, "--gpus", counts, "--global-batch", str(batch),
                                "--tokens", "15T", "--out", out]) for _ in range(a.repeat)]
        sweep_cli = min(sweep_runs)
    print(f"commands end to end: autoplan search ({mid} GPUs) {search_cpu:.2f} s CPU; autoplan sweep ({len(gpus)} "
          f"counts, --tokens 15T) {sweep_cli[0]:.2f} s CPU ({sweep_cli[1]:.2f} s wall) = "
          f"{sweep_cli[0] / search_cpu:.2f}x one search command")


if __name__ == "__main__":
    main()
