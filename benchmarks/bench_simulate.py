"""CPU time of simulating one plan, cold and warm, over two spaces of GPT-3 175B on 1024 H100s:

* the GPT-3 space: the default space, one plan per (tp, pp, cp, micro-batch, schedule, ZeRO stage): 742 plans;
* the zero-bubble space (search_spaces/zero-bubble.toml), the same way: every schedule, DualPipe included.

Each plan is scored whether it fits or not (``simulate.score``: the memory per stage and the simulated step, what
``autoplan simulate`` does). Cold: every autoplan cache cleared, and the model, cluster and plan rebuilt (they keep
their hash and a few counts), before the plan; warm: the same plan again at once (every cache full, as inside a
search). Per space: median, p90, p99, max and mean, and the slowest plans. CPU time (``time.process_time``): the
machine is shared; each plan's figure is the median of ``--repeat`` cold (and warm) runs.

``--old PATH`` runs the same measurement with the autoplan of another checkout (e.g. ``git worktree add /tmp/old
003aedb``) in a subprocess, on the same machine, and prints it beside.

Run: python benchmarks/bench_simulate.py [--quick] [--old PATH] [--space gpt3|zero-bubble|both] [--repeat N]
     (--quick: 60 plans of each space, drawn evenly)
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

SPACES = {"gpt3": "default", "zero-bubble": "zero-bubble"}
SHAPE_AXES = ("tp", "pp", "cp", "micro_batch", "schedule", "zero")
"""One plan per combination of these (the first valid one in the space's order)."""


def autoplan_caches() -> list:
    """Every cache of every autoplan module (functools' and the size-bounded ones): whatever has ``cache_clear``."""
    import autoplan

    found = {}
    for info in pkgutil.walk_packages(autoplan.__path__, "autoplan."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            continue
        for obj in vars(module).values():
            if (not isinstance(obj, type) and callable(getattr(obj, "cache_clear", None))
                    and getattr(obj, "__module__", "").startswith("autoplan")):
                found[id(obj)] = obj
    return list(found.values())


def space_plans(space: str) -> list:
    """One plan per SHAPE_AXES combination of ``space`` (GPT-3 on 1024 H100s, global batch 1536)."""
    from autoplan.families.catalog import get_model
    from autoplan.search.space import enumerate_plans, load_space

    plans, _ = enumerate_plans(get_model("gpt3"), 1024, load_space(space), 1536)
    seen: dict = {}
    for s in plans:
        seen.setdefault(tuple(getattr(s, k) for k in SHAPE_AXES), s)
    return list(seen.values())


def measure(space: str, quick: bool, repeat: int = 3) -> dict:
    """Per-plan cold and warm CPU milliseconds of one space, in this process's autoplan: each the median of
    ``repeat`` runs (the machine is shared: one run may be slowed by another process)."""
    from autoplan.families.catalog import get_model
    from autoplan.families.strategy import Strategy
    from autoplan.sim.simulate import score
    from autoplan.specs import load_cluster

    caches = autoplan_caches()
    plans = space_plans(space)
    if quick:
        plans = plans[::max(1, len(plans) // 60)][:60]
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    fields = [f.name for f in Strategy.KNOBS]
    cold, warm, labels = [], [], []
    for s in plans:
        runs = []
        for _ in range(repeat):
            for c in caches:
                c.cache_clear()
            m, cl = replace(model), replace(cluster, gpu=replace(cluster.gpu))
            plan = Strategy(**{k: getattr(s, k) for k in fields})
            t0 = time.process_time()
            score(m, cl, plan)
            t1 = time.process_time()
            score(m, cl, plan)
            runs.append((t1 - t0, time.process_time() - t1))
        cold.append(statistics.median(r[0] for r in runs) * 1e3)
        warm.append(statistics.median(r[1] for r in runs) * 1e3)
        labels.append(s.short())
    return {"space": space, "plans": len(plans), "cold": cold, "warm": warm, "labels": labels}


def stats(xs: list[float]) -> dict:
    s = sorted(xs)
    at = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return {"median": statistics.median(s), "p90": at(0.9), "p99": at(0.99), "max": s[-1], "mean": statistics.mean(s)}


def _run_old(path: str, space: str, quick: bool, repeat: int) -> dict:
    """``measure`` in a subprocess with ``path``'s autoplan first on the path."""
    code = (f"import json, sys; sys.path.append({str(Path(__file__).resolve().parent)!r}); import autoplan, "
            f"bench_simulate as b; print(autoplan.__file__, file=sys.stderr); "
            f"print(json.dumps(b.measure({SPACES[space]!r}, {quick!r}, {repeat!r})))")
    root = str(Path(path).resolve())
    out = subprocess.run([sys.executable, "-c", code], env=os.environ | {"PYTHONPATH": root}, cwd=root,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(name: str, new: dict, old: dict | None) -> None:
    print(f"\n**{name}: GPT-3 175B on 1024 H100s, {new['plans']} plans (one per {', '.join(SHAPE_AXES)}), "
          f"CPU ms per plan**\n")
    print("| code | | median | p90 | p99 | max | mean |")
    print("|---|---|---|---|---|---|---|")
    for label, data in (("old", old), ("new", new)):
        if data is None:
            continue
        for kind in ("cold", "warm"):
            st = stats(data[kind])
            print(f"| {label} | {kind} | {st['median']:.2f} | {st['p90']:.2f} | {st['p99']:.2f} | {st['max']:.1f} | "
                  f"{st['mean']:.2f} |")
    slowest = sorted(zip(new["cold"], new["labels"]), reverse=True)[:5]
    print("\nslowest cold (new): " + "; ".join(f"{label} {ms:.1f} ms" for ms, label in slowest))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="60 plans of each space")
    ap.add_argument("--old", default=None, help="a checkout of an older autoplan to measure beside (subprocess)")
    ap.add_argument("--space", choices=("gpt3", "zero-bubble", "both"), default="both")
    ap.add_argument("--repeat", type=int, default=None, help="runs per plan, cold and warm (median; default 3, "
                    "--quick 1)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    for name in (("gpt3", "zero-bubble") if args.space == "both" else (args.space,)):
        repeat = args.repeat or (1 if args.quick else 3)
        new = measure(SPACES[name], args.quick, repeat)
        old = _run_old(args.old, name, args.quick, repeat) if args.old else None
        report(name, new, old)


if __name__ == "__main__":
    main()
