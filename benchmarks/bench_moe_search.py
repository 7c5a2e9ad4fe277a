"""MoE search speed and where DeepSeek's published layout ranks.

1. Wall time of `autoplan search --model deepseek-v3 --gpus 2048 --cluster dgx-h800-80g --global-batch 15360`
   as a user runs it (a fresh process, the default --workers; target ≤ 10 s on 2 cores), and of the same search
   in this process, serial.
2. The published layout, DeepSeek-V3 report (arXiv 2412.19437) §3.2: 2048 H800, PP16 EP64 TP1 (so DP128 with
   ZeRO-1), 15360 sequences of 4096 at the end of the batch-size schedule (§4.2), DualPipe. DualPipe is not in
   the space (1F1B stands in for it, without EP overlap: Megatron-Core refuses that at pp > 1 without virtual
   stages); the micro-batch, recompute (DeepSeek's is ``modules``, §3.3.3) and the first/last-stage split of the
   61 layers are not published here, so the fastest feasible variant over them is ranked against every plan of
   the MoE space (BF16 and the default numerics: the CLI's default; `bench_published.py --moe-only` ranks DualPipe
   with FP8, DeepSeek's FP8-stored SwiGLU inputs and BF16 AdamW moments, and the zero-bubble schedules).

Measured (2-core machine, load average 0.9): 7.6 s wall, 7.7 s CPU for the CLI search (9.1 s / 8.3 s at load 3.4);
the published layout 448th of 1,405 feasible plans (tp1 pp16 dp128 mb1 1f1b full z1 L4/1 ep64, 39.54 s).

Run: python benchmarks/bench_moe_search.py [--quick]
     (--quick: the same steps for Qwen3 30B-A3B on 8 H100s, a PP2 EP4 layout standing in for DeepSeek's; one CLI run)
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from autoplan.search.exhaustive import search
from autoplan.search.space import enumerate_plans, load_space
from autoplan.sim.simulate import evaluate
from autoplan.families.strategy import Strategy
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster


@dataclass(frozen=True)
class Case:
    """A search to time and the published layout to rank: its tp/pp/dp/ep and the first/last-stage splits tried."""

    model: str
    gpus: int
    cluster: str
    batch: int
    layout: dict
    ends: tuple[tuple[int, int], ...]
    cli_runs: int
    """Fresh-process CLI searches timed (the best is printed)."""

    @property
    def label(self) -> str:
        return f"PP{self.layout['pp']} EP{self.layout['ep']} TP{self.layout['tp']}"


FULL = Case("deepseek-v3", 2048, "dgx-h800-80g", 15360, dict(tp=1, pp=16, dp=128, ep=64),
            ((3, 2), (2, 3), (4, 1), (1, 4)), cli_runs=2)
QUICK = Case("qwen3-30b-a3b", 8, "dgx-h100-80g", 16, dict(tp=1, pp=2, dp=4, ep=4), ((25, 23), (23, 25)), cli_runs=1)
"""--quick: the same steps on one small MoE (48 layers on two stages; no published layout, so one like DeepSeek's)."""


def cli_wall(case: Case) -> tuple[float, float]:
    """Wall and CPU seconds of the search command in a fresh process (imports and the run folder included); the
    CPU time tells a loaded machine from a slow search."""
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "autoplan", "search", "--model", case.model, "--gpus", str(case.gpus),
                        "--cluster", case.cluster, "--global-batch", str(case.batch), "--out", out],
                       check=True, capture_output=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def published_variants(model, cluster, case: Case = FULL):
    """Every feasible variant of the published layout (DeepSeek's PP16 EP64 TP1) over the knobs the report does not
    give."""
    out = []
    for mb, rc, (first, last), ovl in itertools.product((1, 2), ("none", "selective", "full", "modules"),
                                                        case.ends, _overlaps()):
        s = Strategy(**case.layout, global_batch=case.batch, micro_batch=mb, recompute=rc, zero=1,
                     first_stage_layers=first, last_stage_layers=last, **ovl)
        e = evaluate(model, cluster, s)
        if e.feasible:
            out.append(e)
    return sorted(out, key=lambda e: e.metrics.step_time)


def _overlaps() -> list[dict]:
    """The EP all-to-all overlap settings the Strategy knows (DualPipe hides the all-to-alls)."""
    from autoplan.families.strategy import AXES

    return [{"ep_overlap": v} for v in (False, True)] if "ep_overlap" in AXES else [{}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"{QUICK.model} on {QUICK.gpus} GPUs, layout {QUICK.label}, one CLI run (a few seconds)")
    case = QUICK if ap.parse_args().quick else FULL
    gpus, batch = case.gpus, case.batch
    model, cluster = get_model(case.model), load_cluster(case.cluster, gpus)
    wall, cpu = min(cli_wall(case) for _ in range(case.cli_runs))
    print(f"autoplan search --model {case.model} --gpus {gpus} --cluster {case.cluster} --global-batch {batch}: "
          f"{wall:.1f} s wall, {cpu:.1f} s CPU (best of {case.cli_runs}, fresh process, default workers; load average "
          f"{os.getloadavg()[0]:.1f})")
    t0 = time.perf_counter()
    plans, _ = enumerate_plans(model, gpus, load_space("moe"), batch)
    board = search(model, cluster, plans, top_k=10)
    print(f"in-process serial search: {time.perf_counter() - t0:.1f} s, {len(plans)} valid plans, "
          f"{len(board.evaluations)} simulated")
    for i, e in enumerate(board.leaderboard[:5], 1):
        print(f"  {i:>2} {e.strategy.short():<46} {e.metrics.step_time:7.3f} s  MFU {100 * e.metrics.mfu:4.1f} %  "
              f"{e.metrics.tokens_per_s / gpus:6.0f} tokens/s/GPU")
    pub = published_variants(model, cluster, case)
    if not pub:
        print(f"published layout {case.label}: no feasible variant")
        return
    best = pub[0]
    full = search(model, cluster, plans, top_k=len(plans)).leaderboard
    rank = 1 + sum(e.metrics.step_time < best.metrics.step_time for e in full)
    gain = 100 * (1 - board.leaderboard[0].metrics.step_time / best.metrics.step_time)
    print(f"published layout (fastest variant) {best.strategy.short()}: {best.metrics.step_time:.3f} s, "
          f"MFU {100 * best.metrics.mfu:.1f} %, {best.metrics.tokens_per_s / gpus:.0f} tokens/s/GPU; rank {rank} of "
          f"{len(full)} feasible plans; our best is {gain:.0f} % faster")
    # DeepSeek-V3 report §1/Table 1: 2.664M H800 GPU hours for 14.8T pre-training tokens
    print(f"DeepSeek's measured mean: {14.8e12 / 2.664e6 / 3600:.0f} tokens/s/GPU "
          "(FP8, DualPipe, node-limited routing)")


if __name__ == "__main__":
    main()
