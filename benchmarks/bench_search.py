"""The search as a user runs it, on this machine, new code beside an older checkout (``--old PATH``, e.g.
``git worktree add /tmp/old 003aedb``):

1. ``autoplan search --model gpt3 --gpus 1024``: CPU seconds of the whole command (interpreter, imports, search,
   leaderboard files, report), median of several runs; and ``autoplan --help``. Each checkout is measured from a
   copy of its package with its bytecode compiled (as a pip install leaves it) and from one without (every module
   compiled again at each run: a checkout under PYTHONDONTWRITEBYTECODE=1, as on the machine these figures were
   first taken on; about 0.12 s more).
2. Where that CPU goes, by phase (cProfile of the command; the shares are scaled to the median CPU above, and
   cProfile's overhead falls more on Python loops than on numpy, so they are approximate).
3. ``--workers`` left to its default against ``--workers 0``: never slower (it stays in this process unless Ray
   would win back its start, ``AutoExecutor``), with the choice it made.
4. A long exhaustive search (the zero-bubble space, top 1000) serial and on 2 Ray workers: wall time, the CPU of
   every process of the run (Ray's daemons and workers included) and the load average; with 2 CPUs busy with
   nothing else, the 2 workers' wall time is at best that CPU over 2. Then its search alone, in this process: serial,
   and on a Ray whose 2 workers are already started and warm (what the workers give once Ray's start is paid).
5. ``--prefilter K`` (5, 10, 25 %) over benchmarks/bench_symbolic.py's cases: does the symbolic order keep the
   simulator's best plan, and does the search return it (it widens to every dropped plan that could still win).

Run: python benchmarks/bench_search.py [--quick] [--old PATH] [--repeat N] [--skip-ray]
     (--quick: one run each, compiled bytecode only, the phases of the new code only, no Ray, the GPT-3
     pre-filter case only)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADLINE = ["search", "--model", "gpt3", "--gpus", "1024"]
LONG = ["search", "--model", "gpt3", "--gpus", "1024", "--space", "zero-bubble", "--top", "1000"]
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _env(root: Path) -> tuple[dict, str]:
    # no bytecode written: a run measures the bytecode its folder holds (``copy_of``), the same every time
    return os.environ | {"PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}, str(root)


def cli_cpu(args: list[str], root: Path = ROOT, repeat: int = 5) -> tuple[float, float]:
    """Median CPU and wall seconds of ``python -m autoplan ARGS`` (the command alone: its own process)."""
    env, cwd = _env(root)
    cpu, wall = [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as out:
            extra = ["--out", out] if args[:1] == ["search"] else []
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "autoplan", *args, *extra], env=env, cwd=cwd, check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(cpu), statistics.median(wall)


PROFILE = """
import cProfile, sys
sys.argv = ["autoplan"] + sys.argv[1:]
profile = cProfile.Profile()
profile.enable()
try:
    from autoplan.cli import main
    main()
except SystemExit:
    pass
profile.disable()
profile.dump_stats(OUT)
"""

PHASES = [
    # (phase, the functions whose time it is: (name, file))
    ("enumerate the space", [("enumerate_plans", "space.py")]),
    # _or_zero: every bound the search asks (this code); the named ones: an older checkout's
    ("bounds", [("_or_zero", "exhaustive.py"), ("_bound_or_zero", "exhaustive.py"),
                ("_step_bound_or_zero", "exhaustive.py"), ("_release_bound_or_zero", "exhaustive.py")]),
    ("memory check", [("_may_fit", "exhaustive.py")]),
    ("simulate", [("evaluate_batch", "executors.py")]),
    ("record evaluations.jsonl", [("__call__", "folder.py")]),
    ("Optuna study", [("open_study", "study.py"), ("record", "study.py")]),
    ("leaderboard files", [("leaderboard_files", "leaderboard.py")]),
    ("print the leaderboard", [("print", "console.py")]),
    ("report: read the run back", [("load_run", "analysis.py")]),
    ("report: simulate the top plans", [("simulate_top", "analysis.py")]),
    ("report: traces", [("write_traces", "write.py")]),
    ("report: importances", [("importances", "analysis.py")]),
    ("report: hardware elasticity", [("hardware_elasticity", "analysis.py")]),
    ("report: neighbours", [("neighbours", "analysis.py")]),
    ("report: page", [("page", "html.py")]),
]


def phases(root: Path, args: list[str]) -> tuple[dict[str, float], float]:
    """Share of the command's profiled time per phase; and the profile's total."""
    env, cwd = _env(root)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "prof"
        code = PROFILE.replace("OUT", repr(str(out)))
        subprocess.run([sys.executable, "-c", code, *args, "--out", tmp], env=env, cwd=cwd, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        st = pstats.Stats(str(out))
    cum: dict[tuple[str, str], float] = {}
    for (path, _, name), row in st.stats.items():
        key = (name, path if path.startswith("<") else Path(path).name)
        cum[key] = max(cum.get(key, 0.0), row[3])
    total = max(st.total_tt, max(row[3] for row in st.stats.values()))
    # every import, wherever it happens (the commands import their modules when they run)
    shares = {"imports": cum.get(("_find_and_load", "<frozen importlib._bootstrap>"), 0.0)}
    for phase, functions in PHASES:
        shares[phase] = sum(cum.get(f, 0.0) for f in functions)
    report = cum.get(("write_report", "write.py"), 0.0)
    shares["report: other"] = max(0.0, report - sum(v for k, v in shares.items() if k.startswith("report: ")))
    shares["other"] = max(0.0, total - sum(shares.values()))
    return {k: v / total for k, v in shares.items()}, total


@contextlib.contextmanager
def copy_of(root: Path, compiled: bool):
    """A copy of ``root``'s package, search spaces and cluster specs in a temporary folder, its bytecode compiled (as a pip install
    leaves it) or not (a checkout under PYTHONDONTWRITEBYTECODE=1, where every run compiles every module)."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(root / "autoplan", Path(tmp) / "autoplan", ignore=shutil.ignore_patterns("__pycache__"))
        for folder in ("search_spaces", "cluster_specs"):        # read from beside the package
            shutil.copytree(root / folder, Path(tmp) / folder)
        if compiled:
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(tmp) / "autoplan")], check=True,
                           stdout=subprocess.DEVNULL)
        yield Path(tmp)


def headline(old: Path | None, repeat: int, quick: bool) -> None:
    print(f"\n**`autoplan {' '.join(HEADLINE)}`: CPU seconds of the whole command (median of {repeat})**\n")
    print("with the package's bytecode compiled (as installed), and without (every module compiled at every run: a "
          "checkout under PYTHONDONTWRITEBYTECODE=1, as this machine sets it)\n")
    print("| code | CPU s, bytecode compiled | CPU s, not compiled | wall s (compiled) | `--help` CPU s (compiled) |")
    print("|---|---|---|---|---|")
    rows = {}
    for label, root in (("old", old), ("new", ROOT)):
        if root is None:
            continue
        cells = {}
        for compiled in (True,) if quick else (True, False):
            with copy_of(root, compiled) as copy:
                cells[compiled] = cli_cpu(HEADLINE, copy, repeat), cli_cpu(["--help"], copy, repeat)
        (cpu, wall), (help_cpu, _) = cells[True]
        uncompiled = cells[False][0][0] if False in cells else float("nan")             # --quick: not measured
        rows[label] = (root, uncompiled if not quick else cpu)
        print(f"| {label} | {cpu:.2f} | {uncompiled:.2f} | {wall:.2f} | {help_cpu:.3f} |")
    print("\n**where the CPU goes (cProfile shares of the checkout's run, × its median CPU without compiled "
          "bytecode)**\n")
    profiled = []
    for label, (root, cpu) in rows.items():
        if not (quick and label == "old"):
            with copy_of(root, False) as copy:
                profiled.append((label, *phases(copy, HEADLINE), cpu))
    names = list(profiled[0][1])
    print("| phase | " + " | ".join(f"{label} s | {label} %" for label, *_ in profiled) + " |")
    print("|---|" + "---|---|" * len(profiled))
    for name in names:
        cells = " | ".join(f"{share[name] * cpu:.3f} | {100 * share[name]:.1f}" for _, share, _, cpu in profiled)
        print(f"| {name} | {cells} |")


def default_workers(repeat: int) -> None:
    from autoplan.families.catalog import get_model
    from autoplan.search.executors import AutoExecutor
    from autoplan.search.exhaustive import search
    from autoplan.search.space import enumerate_plans, load_space
    from autoplan.specs import load_cluster

    print("\n**`--workers` default against `--workers 0` (the headline command)**\n")
    print("| --workers | CPU s | wall s |")
    print("|---|---|---|")
    for label, extra in (("default", []), ("0", ["--workers", "0"])):
        cpu, wall = cli_cpu(HEADLINE + extra, ROOT, repeat)
        print(f"| {label} | {cpu:.2f} | {wall:.2f} |")
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    plans, _ = enumerate_plans(model, 1024, load_space(), 1536)
    auto = AutoExecutor(os.cpu_count() or 1)
    search(model, cluster, plans, executor=auto)
    auto.close()
    print(f"\nthe default's choice (decided once, after its first batch): {auto.choice}")


def processes() -> dict[int, tuple[int, float]]:
    """Every live process: its parent's pid and its CPU seconds so far (utime + stime of /proc/PID/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                text = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            rest = text[text.rindex(")") + 2:].split()
            out[int(d)] = (int(rest[1]), (int(rest[11]) + int(rest[12])) / tick)
    return out


def tree_run(args: list[str]) -> tuple[float, float]:
    """Wall seconds of ``python -m autoplan ARGS`` and the CPU seconds of every process it started (read from /proc
    every 0.1 s while they live: Ray's daemons and workers are not its waited-for children)."""
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "autoplan", *args, "--out", out], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seen: dict[int, float] = {}
        while proc.poll() is None:
            procs = processes()
            family, todo = {proc.pid}, [proc.pid]
            while todo:
                parent = todo.pop()
                for pid, (ppid, _) in procs.items():
                    if ppid == parent and pid not in family:
                        family.add(pid)
                        todo.append(pid)
            for pid in family:
                if pid in procs:
                    seen[pid] = procs[pid][1]
            time.sleep(0.1)
        wall = time.perf_counter() - t0
    return wall, sum(seen.values())


def _tree_cpu(root: int) -> float:
    """CPU seconds so far of every descendant of process ``root`` (not ``root`` itself)."""
    children: dict[int, list[tuple[int, float]]] = {}
    for pid, (ppid, cpu) in processes().items():
        children.setdefault(ppid, []).append((pid, cpu))
    total, todo = 0.0, [root]
    while todo:
        for pid, cpu in children.get(todo.pop(), []):
            total += cpu
            todo.append(pid)
    return total


def ray_search_phase() -> None:
    """The long search's exact search alone (enumerated beforehand), serial and on a Ray with 2 workers already
    started and warm (their imports done): what the workers give once Ray's start is paid."""
    from autoplan.families.catalog import get_model
    from autoplan.search.exhaustive import search
    from autoplan.search.executors import RayExecutor, SerialExecutor
    from autoplan.search.space import enumerate_plans, load_space
    from autoplan.specs import load_cluster

    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    plans, _ = enumerate_plans(model, 1024, load_space("zero-bubble"), 1536)
    print("\n**its search alone (enumerated beforehand; Ray started and its 2 workers warm)**\n")
    print("| executor | wall s | this process CPU s | other processes CPU s | simulated | load average |")
    print("|---|---|---|---|---|---|")
    sys.path.insert(0, str(HERE))
    from bench_simulate import autoplan_caches

    out = {}
    for label in ("serial", "Ray, 2 workers"):
        for c in autoplan_caches():
            c.cache_clear()
        ex = SerialExecutor() if label == "serial" else RayExecutor(2)
        if label != "serial":
            list(ex.map(model, cluster, [plans[:2], plans[2:4]]))
        t0, c0, k0 = time.perf_counter(), time.process_time(), _tree_cpu(os.getpid())
        result = search(model, cluster, plans, top_k=1000, executor=ex)
        wall, own, others = time.perf_counter() - t0, time.process_time() - c0, _tree_cpu(os.getpid()) - k0
        ex.close()
        out[label] = (wall, own, others)
        print(f"| {label} | {wall:.1f} | {own:.1f} | {others:.1f} | {len(result.evaluations)} | "
              f"{os.getloadavg()[0]:.1f} |")
    serial = out["serial"][1]
    _, own, others = out["Ray, 2 workers"]
    best = serial / max(own, (own + others) / 2)
    print(f"\non 2 idle CPUs: at best {best:.2f}× ({serial:.1f} s of serial CPU against {own + others:.1f} s over "
          f"2 CPUs); measured wall here {out['serial'][0] / out['Ray, 2 workers'][0]:.2f}× at the load above")


def ray_scaling() -> None:
    print(f"\n**a long search: `autoplan {' '.join(LONG)}`, serial and on 2 Ray workers**\n")
    print("| --workers | wall s | CPU s (all processes) | load average before |")
    print("|---|---|---|---|")
    runs = {}
    for workers in ("0", "2"):
        load = os.getloadavg()[0]
        wall, cpu = tree_run(LONG + ["--workers", workers])
        runs[workers] = (wall, cpu)
        print(f"| {workers} | {wall:.1f} | {cpu:.1f} | {load:.1f} |")
    (w0, c0), (_, c2) = runs["0"], runs["2"]
    print(f"\nwith 2 idle CPUs the 2 workers take at least {c2 / 2:.1f} s against {c0:.1f} s of serial CPU: "
          f"{2 * c0 / c2:.2f}× at best (measured wall here: {w0 / runs['2'][0]:.2f}×, at the load above)")
    ray_search_phase()


def prefilter_cases(quick: bool) -> None:
    sys.path.insert(0, str(HERE))
    from bench_symbolic import CASES

    from autoplan.families.catalog import get_model
    from autoplan.search.exhaustive import search
    from autoplan.search.run import run_search
    from autoplan.search.space import enumerate_plans, load_space
    from autoplan.search.symbolic import symbolic_order
    from autoplan.specs import load_cluster

    print("\n**`--prefilter K`: is the simulator's best plan among the symbolic best K %, and is it returned**\n")
    print("| case | plans | symbolic rank of the best | kept at 5 / 10 / 25 % | returned (widened by) |")
    print("|---|---|---|---|---|")
    cases = [c for rows in CASES.values() for c in rows]
    if quick:
        cases = [c for c in cases if c[0] == "gpt3"]
    kept_cases = total_cases = returned_cases = 0
    for name, gpus, cluster_name, batch, space in cases:
        model, cluster = get_model(name), load_cluster(cluster_name, gpus)
        plans, _ = enumerate_plans(model, gpus, load_space(space), batch)
        best = search(model, cluster, plans, top_k=1).leaderboard[0].strategy
        order = [s for _, s in symbolic_order(model, cluster, plans, "balance")[0]]
        rank = order.index(best) + 1
        kept = [rank <= max(10, -(-len(order) * k // 100)) for k in (5, 10, 25)]
        kept_cases += sum(kept)
        total_cases += len(kept)
        with tempfile.TemporaryDirectory() as tmp:
            got = run_search(model, cluster, plans, Path(tmp), sampler="exhaustive", top_k=10, workers=0,
                             prefilter=5)
        returned = got.leaderboard[0].strategy == best
        returned_cases += returned
        print(f"| {name} on {gpus} | {len(order)} | {rank} | {' / '.join('yes' if k else 'NO' for k in kept)} | "
              f"{'yes' if returned else 'NO'} ({got.widened}) |")
    print(f"\nthe symbolic order keeps the best in {kept_cases} of {total_cases} (case, K) pairs "
          f"({100 * kept_cases / total_cases:.0f} %); `--prefilter 5` returns it in {returned_cases} of {len(cases)} "
          f"cases (it widens)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--old", default=None, help="a checkout of an older autoplan to measure beside")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--skip-ray", action="store_true", help="leave out the long search on Ray")
    args = ap.parse_args()
    repeat = args.repeat or (1 if args.quick else 5)
    print(f"load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    headline(Path(args.old).resolve() if args.old else None, repeat, args.quick)
    default_workers(repeat)
    if not (args.quick or args.skip_ray):
        ray_scaling()
    prefilter_cases(args.quick)


if __name__ == "__main__":
    main()
