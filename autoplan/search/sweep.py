"""A sweep over GPU counts: the best plan at each count, the run it gives for a token budget (days, GPU-hours,
energy, cost), the scaling curve with its efficiency, and the cheapest count that meets a deadline and a budget.

Work shared between counts is reused: one process and one executor search every count, so the caches keyed by
shape rather than by GPU count (GEMM and kernel times, pipeline schedules, the engine's task graphs, whose steady
state is simulated at a few micro-batches whatever dp is) are built once for the whole sweep; and each count asks
only for its best plans (``top_k`` 1 by default), so its exact search stops as soon as no other plan can beat the
fastest. With ``workers`` > 1 the counts run side by side in forked worker processes, each keeping its caches over
the counts it is given. The result at each count is the exact best plan of the space.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from autoplan.errors import SpecError
from autoplan.search.exhaustive import SearchResult, rank_key, search
from autoplan.search.executors import Executor, SerialExecutor
from autoplan.search.space import Space, enumerate_plans, reason_key
from autoplan.search.totals import Budget, RunTotals, run_totals
from autoplan.sim.simulate import Evaluation
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec

EFFICIENCY_THRESHOLD = 0.8
"""Scaling efficiency (throughput per GPU over the smallest count's) below which a count is marked: adding GPUs
there buys less than 80 % of their share."""


def natural_counts(cluster: ClusterSpec, low: int, high: int) -> list[int]:
    """GPU counts in [low, high] worth a point: powers of two, and powers-of-two multiples of the cluster's natural
    units (a node, an NVLink domain or rack, a leaf switch's scalable unit); whole nodes only."""
    units = {1, cluster.gpus_per_node, cluster.domain_gpus} | {t.gpus for t in cluster.tiers if t.gpus > 0}
    counts = set()
    for unit in units:
        n = unit
        while n <= high:
            if n >= low and n % cluster.gpus_per_node == 0:
                counts.add(n)
            n *= 2
    return sorted(counts)


def parse_counts(text: str, cluster: ClusterSpec) -> list[int]:
    """``1024..16384`` (natural counts in the range), ``1024,2048,3072`` or ``4096``: the GPU counts to sweep."""
    from autoplan.specs.cluster import MAX_GPUS

    def number(part: str) -> int:
        part = part.strip().replace("_", "")
        if not part.isdigit() or int(part) < 1:
            raise SpecError(f"--gpus {text!r}: {part!r} is not a positive whole number of GPUs")
        if int(part) > MAX_GPUS:
            raise SpecError(f"--gpus {text!r}: {part} is more than the {MAX_GPUS:,} GPUs autoplan plans for")
        return int(part)

    if ".." in text:
        low, _, high = text.partition("..")
        lo, hi = number(low), number(high)
        if lo > hi:
            raise SpecError(f"--gpus {text!r}: the range runs from {lo} down to {hi}; give LOW..HIGH")
        counts = natural_counts(cluster, lo, hi)
        if not counts:
            raise SpecError(f"--gpus {text!r}: no count in the range fills whole {cluster.name} nodes of "
                            f"{cluster.gpus_per_node} GPUs")
        return counts
    counts = sorted({number(p) for p in text.split(",")})
    for n in counts:
        cluster.with_gpus(n)                      # whole nodes, or a one-line error naming the count
    return counts


@dataclass(frozen=True, kw_only=True)
class Point:
    """One GPU count of a sweep."""

    gpus: int
    board: tuple[Evaluation, ...]
    """The best plans at this count, fastest first; empty if none is valid or fits."""
    totals: RunTotals | None = None
    """The best plan's whole run, when the sweep has a budget."""
    valid: int = 0
    simulated: int = 0
    cpu_s: float = 0.0
    """CPU seconds this count's enumeration and search took."""
    note: str = ""
    """Why no plan runs at this count."""

    @property
    def best(self) -> Evaluation | None:
        """The fastest plan, or None."""
        return self.board[0] if self.board else None


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """Every count of a sweep, smallest first."""

    points: tuple[Point, ...]
    cpu_s: float = 0.0
    wall_s: float = 0.0

    @property
    def ran(self) -> list[Point]:
        """The counts where some plan runs."""
        return [p for p in self.points if p.best is not None]

    def efficiency(self) -> dict[int, float]:
        """Scaling efficiency per count: throughput per GPU over the smallest running count's (1 at that count)."""
        ran = self.ran
        if not ran:
            return {}
        ref = ran[0].best.metrics.tokens_per_s / ran[0].gpus
        return {p.gpus: p.best.metrics.tokens_per_s / p.gpus / ref for p in ran}

    def first_below(self, threshold: float) -> int | None:
        """The smallest count whose efficiency falls below ``threshold``, or None."""
        return next((g for g, eff in self.efficiency().items() if eff < threshold), None)


def _search_count(model: ModelSpec, spec: ClusterSpec, space: Space, global_batch: int, top_k: int,
                  executor: Executor) -> tuple[SearchResult | None, int, str]:
    """The exact search at one count: its result (None without a valid plan), the valid plans and a note."""
    plans, rejected = enumerate_plans(model, spec.gpus, space, global_batch)
    if not plans:
        common = ", ".join(f"{reason_key(r)} ({n})" for r, n in rejected.most_common(2))
        return None, 0, f"no valid plan ({common})"
    result = search(model, spec, plans, top_k, executor)
    return result, len(plans), "" if result.leaderboard else "no valid plan fits in memory"


def sweep_point(model: ModelSpec, cluster: ClusterSpec, gpus: int, space: Space, global_batch: int,
                budget: Budget | None = None, top_k: int = 1, executor: Executor | None = None) -> Point:
    """One count of a sweep: the exact best ``top_k`` plans on ``gpus`` GPUs and the best one's whole run."""
    t0 = time.process_time()
    spec = cluster.with_gpus(gpus)
    result, valid, note = _search_count(model, spec, space, global_batch, top_k, executor or SerialExecutor())
    board = tuple(sorted(result.leaderboard, key=rank_key)) if result else ()
    totals = None
    if budget is not None and board:
        try:
            totals = run_totals(model, spec, board[0], budget)
        except SpecError as err:                    # the best plan cannot run a batch of the ramp
            note = str(err)
    return Point(gpus=gpus, board=board, totals=totals, valid=valid,
                 simulated=len(result.evaluations) if result else 0, cpu_s=time.process_time() - t0, note=note)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_sweep(model: ModelSpec, cluster: ClusterSpec, counts: list[int], space: Space, global_batch: int, *,
              budget: Budget | None = None, top_k: int = 1, workers: int = 0,
              progress: Callable[[int, Point], None] | None = None) -> Sweep:
    """The best ``top_k`` plans at each of ``counts`` GPUs (an exact search per count), with the whole run of the best
    for ``budget``; ``workers`` > 1: that many forked processes search the counts side by side (CPU time counts
    theirs too)."""
    cpu0, wall0, children0 = time.process_time(), time.perf_counter(), _children_cpu()
    points: list[Point] = []
    workers = min(workers, len(counts))
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        # forked workers inherit the loaded modules (no re-import); each keeps its caches over its counts
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = [pool.submit(sweep_point, model, cluster, g, space, global_batch, budget, top_k)
                       for g in counts]
            for future in futures:
                points.append(future.result())
                if progress:
                    progress(len(points), points[-1])
    else:
        executor = SerialExecutor()
        for g in counts:
            points.append(sweep_point(model, cluster, g, space, global_batch, budget, top_k, executor))
            if progress:
                progress(len(points), points[-1])
    cpu = time.process_time() - cpu0 + _children_cpu() - children0
    return Sweep(points=tuple(points), cpu_s=cpu, wall_s=time.perf_counter() - wall0)


def default_workers() -> int:
    """Worker processes a sweep uses by default: the CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass(frozen=True, kw_only=True)
class Choice:
    """The count a deadline and a budget pick, or why none can be picked."""

    point: Point | None
    """The cheapest count meeting every constraint (ties: the fewest days), or None."""
    message: str
    """What was picked and why, or which constraint cannot be met and by how much."""
    days_over: float = 0.0
    """Days the fastest count (or the fastest within the budget) misses the deadline by; 0 if met."""
    usd_over: float = 0.0
    """Dollars the cheapest count (or the cheapest within the deadline) misses the budget by; 0 if met."""


def _days(p: Point) -> float:
    return p.totals.days


def _usd(p: Point) -> float:
    return p.totals.cost_usd


def choose(sweep: Sweep, deadline_days: float | None = None, budget_usd: float | None = None) -> Choice:
    """The cheapest count (and its best plan) that trains within ``deadline_days`` and costs at most ``budget_usd``;
    if none does, which constraint cannot be met and by how much."""
    ran = [p for p in sweep.ran if p.totals is not None]
    if not ran:
        raise SpecError("no GPU count of the sweep has a plan that runs, so none can be chosen")
    if budget_usd is not None and ran[0].totals.cost_usd is None:
        raise SpecError("--budget needs a price: give --gpu-hour-price (the cluster spec has no gpu_hour_usd)")
    priced = ran[0].totals.cost_usd is not None
    cost = _usd if priced else (lambda p: p.totals.gpu_hours)
    on_time = [p for p in ran if deadline_days is None or _days(p) <= deadline_days]
    affordable = [p for p in ran if budget_usd is None or _usd(p) <= budget_usd]
    both = [p for p in on_time if p in affordable]
    if both:
        pick = min(both, key=lambda p: (cost(p), _days(p), p.gpus))
        what = f"${_usd(pick):,.0f}" if priced else f"{pick.totals.gpu_hours:,.0f} GPU-hours"
        why = [f"{_days(pick):.1f} days"] + ([f"within the {deadline_days:g}-day deadline"] if deadline_days else [])
        if budget_usd is not None:
            why.append(f"within the ${budget_usd:,.0f} budget")
        return Choice(point=pick, message=f"{pick.gpus:,} GPUs: the cheapest count that meets the constraints "
                                          f"({what}, {', '.join(why)}): {pick.best.strategy.short()}")
    fastest = min(ran, key=lambda p: (_days(p), p.gpus))
    cheapest = min(ran, key=lambda p: (cost(p), p.gpus))
    if not on_time or not affordable:
        days_over = _days(fastest) - deadline_days if not on_time else 0.0
        usd_over = _usd(cheapest) - budget_usd if not affordable else 0.0
        late = (f"the {deadline_days:g}-day deadline cannot be met: the fastest count, {fastest.gpus:,} GPUs, takes "
                f"{_days(fastest):.1f} days ({days_over:.1f} days, {100 * days_over / deadline_days:.0f} % over)"
                if not on_time else "")
        poor = (f"the ${budget_usd:,.0f} budget cannot be met: the cheapest count, {cheapest.gpus:,} GPUs, costs "
                f"${_usd(cheapest):,.0f} (${usd_over:,.0f}, {100 * usd_over / budget_usd:.0f} % over)"
                if not affordable else "")
        message = "; and ".join(m for m in (late, poor) if m)
        return Choice(point=None, days_over=days_over, usd_over=usd_over, message=message)
    best_on_time = min(on_time, key=lambda p: (_usd(p), p.gpus))
    best_affordable = min(affordable, key=lambda p: (_days(p), p.gpus))
    usd_over, days_over = _usd(best_on_time) - budget_usd, _days(best_affordable) - deadline_days
    return Choice(point=None, usd_over=usd_over, days_over=days_over,
                  message=f"no count meets both: within {deadline_days:g} days the cheapest is {best_on_time.gpus:,} "
                          f"GPUs at ${_usd(best_on_time):,.0f} (${usd_over:,.0f} over the budget); within "
                          f"${budget_usd:,.0f} the fastest is {best_affordable.gpus:,} GPUs at "
                          f"{_days(best_affordable):.1f} days ({days_over:.1f} days over the deadline)")


@dataclass(frozen=True, kw_only=True)
class Curve:
    """The scaling curve as plain numbers (what the report draws)."""

    gpus: list[int]
    throughput: list[float]
    """Tokens (samples) per second of the best plan at each count."""
    ideal: list[float]
    """The smallest count's throughput per GPU times each count."""
    usd_per_mtok: list[float | None]
    """Dollars per million tokens (samples) at each count; None without a price."""
    efficiency: list[float]
    threshold: float
    first_below: int | None
    mfu: list[float] = field(default_factory=list)


def curve(sweep: Sweep, threshold: float = EFFICIENCY_THRESHOLD, gpu_hour_usd: float = 0.0) -> Curve:
    """The scaling curve of the counts where a plan runs (price per GPU-hour ``gpu_hour_usd``; 0: none)."""
    ran = sweep.ran
    eff = sweep.efficiency()
    per_gpu = ran[0].best.metrics.tokens_per_s / ran[0].gpus if ran else 0.0
    # dollars per 1e6 tokens: gpus × price per GPU-second / tokens per second
    usd = [p.gpus * gpu_hour_usd / 3600 / p.best.metrics.tokens_per_s * 1e6 if gpu_hour_usd else None for p in ran]
    return Curve(gpus=[p.gpus for p in ran], throughput=[p.best.metrics.tokens_per_s for p in ran],
                 ideal=[per_gpu * p.gpus for p in ran], usd_per_mtok=usd, efficiency=[eff[p.gpus] for p in ran],
                 threshold=threshold, first_below=sweep.first_below(threshold),
                 mfu=[p.best.metrics.mfu for p in ran])
